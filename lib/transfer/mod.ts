/**
 * `lmpool/transfer`: the KV-transfer options LLMEngine takes (`transfers`), their defaults and
 * validation.
 * @module
 */
export {
  DATA_PATHS,
  DEFAULT_TRANSFER_OPTIONS,
  resolveTransferOptions,
  TRANSFER_MODES,
} from "./control/transfer_config.ts";
export type {
  DataPathSetting,
  TransferConfigInput,
  TransferModeSetting,
  TransferOptions,
} from "./control/transfer_config.ts";
