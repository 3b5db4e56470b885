/**
 * The KV-transfer options users set ({@link TransferOptions}: the mode switch, foreground and
 * background transfers, the cost gate, plan deadlines, the workers' payload data path and the
 * measured latency profile), with documented defaults, and the control plane's resolved
 * {@link TransferConfig}: those options plus the internal constants of transfer_tuning.ts.
 * Times are ms; sizes are blocks unless named otherwise.
 * @module
 */
import {
  DEFAULT_TRANSFER_TUNING,
  INTEGER_TUNING,
  POSITIVE_TUNING,
  TRANSFER_TUNING_KEYS,
  type TransferTuning,
} from "./transfer_tuning.ts";

/** off: never transfer. auto: cost-gated. force: admit every valid candidate, ignoring the cost ratio. */
export const TRANSFER_MODES = ["off", "auto", "force"] as const;
/** One of TRANSFER_MODES. */
export type TransferModeSetting = (typeof TRANSFER_MODES)[number];

/**
 * How workers move a plan's K/V payload between direct partners (cuda backend). auto: per partner,
 * the fastest path that comes up: for a partner on the same device the device-local copy (CUDA IPC
 * on that device), for one on another device CUDA IPC (the source copies into the partner's cache
 * with the copy engine), else an NCCL pair; else the host socket path (also used after a direct
 * path fails). host: always the host socket path. ipc / nccl: only that direct path ("ipc" covers
 * the device-local copy; "nccl" refuses two ranks of one device, which NCCL cannot pair); a pair
 * that cannot come up at start-up is a start-up error (the worker exits naming the pair and the
 * cause).
 */
export const DATA_PATHS = ["auto", "host", "ipc", "nccl"] as const;
/** One of DATA_PATHS. */
export type DataPathSetting = (typeof DATA_PATHS)[number];

/** The transfer options users set (LLMEngine's `transfers`). */
export interface TransferOptions {
  /** Default "auto". */
  mode: TransferModeSetting;
  /** Run foreground (request-shortage) transfers. Default true. */
  foreground: boolean;
  /** Run background placement. Default true. */
  background: boolean;
  /** Admit a plan only when saved prefill ms >= safetyRatio x estimated transfer ms. Default 2. */
  safetyRatio: number;
  /** Deadline of a foreground plan (the plan may outlive its request's wait and still publish). Default 2000 ms. */
  foregroundDeadlineMs: number;
  /**
   * Longest a route's reply waits for the foreground plans its request needs (its own, or one
   * already bringing its prefix); in auto mode never longer than the prefill those plans save.
   * The request then goes without them and prefills. Default 100 ms.
   */
  foregroundWaitMs: number;
  /** Deadline of a background plan. Default 5000 ms. */
  backgroundDeadlineMs: number;
  /** Worker-to-worker payload path (see DATA_PATHS). Default "auto". */
  dataPath: DataPathSetting;
  /** Bound on creating and warming one NCCL pair at start-up, and on one plan's NCCL transfer. Default 30000 ms. */
  ncclTimeoutMs: number;
  /** Bound on one plan's CUDA IPC copy, and on each side's wait for the other's signal. Default 10000 ms. */
  ipcTimeoutMs: number;
  /** Measured latency profile (JSON value or a file path; format in transfer_cost_model.ts). Unset: the fallback. */
  profile?: unknown;
  /** Calibration residuals (JSON value or a file path; format in transfer_cost_model.ts). */
  residuals?: unknown;
}

/** Defaults of every transfer option. */
export const DEFAULT_TRANSFER_OPTIONS: Readonly<TransferOptions> = Object.freeze({
  mode: "auto",
  foreground: true,
  background: true,
  safetyRatio: 2,
  foregroundDeadlineMs: 2000,
  foregroundWaitMs: 100,
  backgroundDeadlineMs: 5000,
  dataPath: "auto",
  ncclTimeoutMs: 30_000,
  ipcTimeoutMs: 10_000,
});

/** What the control plane runs with: the options and the internal constants (transfer_tuning.ts). */
export type TransferConfig = TransferOptions & TransferTuning;

/** A partial set of options; a bare mode string means `{ mode }`. */
export type TransferConfigInput = TransferModeSetting | Partial<TransferOptions>;

const POSITIVE = [
  "ncclTimeoutMs",
  "ipcTimeoutMs",
  "safetyRatio",
  "foregroundDeadlineMs",
  "backgroundDeadlineMs",
  ...POSITIVE_TUNING,
] as const;
const DEFAULTS: Readonly<TransferConfig> = Object.freeze({ ...DEFAULT_TRANSFER_OPTIONS, ...DEFAULT_TRANSFER_TUNING });

/**
 * The user's options with defaults filled and the constants overridden by `tuning` (internal:
 * tests and benchmarks); throws RangeError naming a bad field and value, and one that names an
 * internal constant given as an option.
 */
export function resolveTransferOptions(
  input: TransferConfigInput = {},
  tuning: Partial<TransferTuning> = {},
): TransferConfig {
  if (typeof input === "object" && input !== null) {
    for (const k of Object.keys(input)) {
      if ((TRANSFER_TUNING_KEYS as readonly string[]).includes(k)) {
        throw new RangeError(
          `transfers.${k} is not a transfer option: it is an internal constant of the cost model (lib/transfer/control/transfer_tuning.ts)`,
        );
      }
    }
  }
  for (const k of Object.keys(tuning)) {
    if (!(TRANSFER_TUNING_KEYS as readonly string[]).includes(k)) {
      throw new RangeError(`unknown transfer constant ${JSON.stringify(k)}`);
    }
  }
  return resolveTransferConfig({ ...(typeof input === "string" ? { mode: input } : input), ...tuning });
}

/**
 * The control plane's config from options and constants in one record (what the launcher sends
 * it; unit tests build it so): fills defaults and validates; throws RangeError naming the bad field
 * and value.
 */
export function resolveTransferConfig(input: TransferConfigInput | Partial<TransferConfig> = {}): TransferConfig {
  const partial = typeof input === "string" ? { mode: input } : input;
  const c: TransferConfig = { ...DEFAULTS, ...partial };
  if (!(TRANSFER_MODES as readonly string[]).includes(c.mode)) {
    throw new RangeError(`transfers mode must be one of ${TRANSFER_MODES.join(", ")}, got ${JSON.stringify(c.mode)}`);
  }
  if (!(DATA_PATHS as readonly string[]).includes(c.dataPath)) {
    throw new RangeError(
      `transfers.dataPath must be one of ${DATA_PATHS.join(", ")}, got ${JSON.stringify(c.dataPath)}`,
    );
  }
  for (const [k, v] of Object.entries(c)) {
    if (k === "mode" || k === "dataPath" || k === "profile" || k === "residuals") continue;
    if (typeof DEFAULTS[k as keyof TransferConfig] === "boolean") {
      if (typeof v !== "boolean") throw new RangeError(`transfers.${k} must be a boolean, got ${String(v)}`);
      continue;
    }
    if (!(k in DEFAULTS)) throw new RangeError(`unknown transfers setting ${JSON.stringify(k)}`);
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
      throw new RangeError(`transfers.${k} must be a finite number >= 0, got ${String(v)}`);
    }
  }
  for (const k of POSITIVE) if (!(c[k] > 0)) throw new RangeError(`transfers.${k} must be > 0, got ${c[k]}`);
  for (const k of INTEGER_TUNING) {
    if (!Number.isInteger(c[k]) || c[k] < 1) {
      throw new RangeError(`transfers.${k} must be an integer >= 1, got ${c[k]}`);
    }
  }
  if (c.targetReserveShare > 1) {
    throw new RangeError(`transfers.targetReserveShare must be in [0, 1], got ${c.targetReserveShare}`);
  }
  if (c.ewmaAlpha <= 0 || c.ewmaAlpha > 1) {
    throw new RangeError(`transfers.ewmaAlpha must be in (0, 1], got ${c.ewmaAlpha}`);
  }
  return c;
}
