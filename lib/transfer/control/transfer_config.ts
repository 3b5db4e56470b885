/**
 * Every KV-transfer knob in one typed config with documented defaults: the mode switch, the
 * foreground (shortage) and background (placement) policies, plan deadlines, leases, the cost
 * model's cold-start fallback and the workers' payload data path (NCCL pairs or host sockets).
 * Times are ms; sizes are blocks unless named otherwise.
 * @module
 */

/** off: never transfer. auto: cost-gated. force: admit every valid candidate, ignoring the cost ratio. */
export const TRANSFER_MODES = ["off", "auto", "force"] as const;
/** One of TRANSFER_MODES. */
export type TransferModeSetting = (typeof TRANSFER_MODES)[number];

/**
 * How workers move a plan's K/V payload between direct NVLink partners on distinct devices (cuda
 * backend). auto: per partner, the fastest path that comes up: CUDA IPC (the source copies into the
 * partner's cache with the copy engine), else an NCCL pair, else the host socket path (also used
 * after a direct path fails). host: always the host socket path. ipc / nccl: only that direct path;
 * a pair that cannot come up at start-up is a start-up error (the worker exits naming the pair and
 * the cause).
 */
export const DATA_PATHS = ["auto", "host", "ipc", "nccl"] as const;
/** One of DATA_PATHS. */
export type DataPathSetting = (typeof DATA_PATHS)[number];

/** The whole transfer configuration. */
export interface TransferConfig {
  /** Default "auto". */
  mode: TransferModeSetting;
  /** Run foreground (request-shortage) transfers. Default true. */
  foreground: boolean;
  /** Run background placement. Default true. */
  background: boolean;
  /** Admit a plan only when saved prefill ms >= safetyRatio x estimated transfer ms. Default 2. */
  safetyRatio: number;
  /** Smallest plan worth a transaction. Default 1. */
  minBatchBlocks: number;
  /** Largest foreground plan (one request's shortage). Default 256. */
  foregroundMaxBlocks: number;
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
  /** Per-chain cap of a background candidate (background_copy_max_blocks). Default 8. */
  backgroundCopyMaxBlocks: number;
  /** Per directed pair cap of one coalesced background plan (background_copy_batch_max_blocks). Default 128. */
  backgroundCopyBatchMaxBlocks: number;
  /** Placement pass period. Default 100 ms. */
  placementIntervalMs: number;
  /** Hotness a chain needs to become a candidate. Default 4. */
  hotnessThreshold: number;
  /** Hotness half-life. Default 30000 ms. */
  hotnessHalfLifeMs: number;
  /** Hotness added per complete-chain access (a route whose prefix matched). Default 1. */
  accessWeight: number;
  /** Extra hotness per route hit on the chosen rank. Default 1. */
  routeHitWeight: number;
  /** Hotness per query that wants the chain (demand visible at ingress). Default 0.5. */
  demandWeight: number;
  /** Chains tracked at most (coldest forgotten first). Default 4096. */
  maxTrackedChains: number;
  /** Background copy only when source queue work exceeds the target's by this many tokens. Default 256. */
  minLoadSkewTokens: number;
  /** ...and by this factor. Default 1.5. */
  minLoadSkewRatio: number;
  /** No second placement of one chain to one rank within this time. Default 10000 ms. */
  cooldownMs: number;
  /** Free blocks a target keeps beyond a background plan. Default 8. */
  targetReserveBlocks: number;
  /** How long routing prefers a placement's destination for its prefix. Default 30000 ms. */
  leaseMs: number;
  /** A lease's rank wins when its projected cost is within this many token-equivalents of the best. Default 512. */
  leaseRouteBonusTokens: number;
  /**
   * Foreground offload: whether a partner's cached blocks colder than a moved chain count as room
   * there (its reclamation would free them first), besides its free blocks. Default false: on
   * recurring traffic the two ranks' caches are about equally hot, and moves that evict the
   * partner's cache only traded one prefix for another while their requests waited (locality 5x
   * on two H200s: mean TTFT 97 ms with it, 84 ms without, 81 ms with no transfers).
   */
  offloadIntoColderCache: boolean;
  /** Foreground offload: expected reuses of a moved chain per past access, discounted. Default 0.5. */
  foregroundReuseDiscount: number;
  /** ...counting at most this many reuses. Default 4. */
  foregroundMaxReuse: number;
  /** Prefill cost per token until worker step timings say otherwise. Default 0.02 ms. */
  prefillMsPerToken: number;
  /** Cold-start cost of a direct-path (NVLink) transfer: fixed latency (default 0 ms) ... */
  fallbackFixedMs: number;
  /**
   * ... plus bytes / this bandwidth (default 3.7e8 bytes/ms = 370 GB/s, the H200 pair's copy-engine
   * path: a 28 MiB block in ~0.09 ms).
   */
  fallbackBytesPerMs: number;
  /** Cold-start cost of a host-path transfer (gather, worker socket, scatter): fixed latency (default 1 ms) ... */
  hostFixedMs: number;
  /** ... plus bytes / this bandwidth (default 2e5 bytes/ms = 200 MB/s: 28 MiB in ~150 ms). */
  hostBytesPerMs: number;
  /** Loaded-inference interference on the data-path term. Default 1. */
  interferenceFactor: number;
  /** Weight of a new observation in the online EWMAs. Default 0.2. */
  ewmaAlpha: number;
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

/** Defaults of every transfer setting. */
export const DEFAULT_TRANSFER_CONFIG: Readonly<TransferConfig> = Object.freeze({
  mode: "auto",
  foreground: true,
  background: true,
  safetyRatio: 2,
  minBatchBlocks: 1,
  foregroundMaxBlocks: 256,
  foregroundDeadlineMs: 2000,
  foregroundWaitMs: 100,
  backgroundDeadlineMs: 5000,
  backgroundCopyMaxBlocks: 8,
  backgroundCopyBatchMaxBlocks: 128,
  placementIntervalMs: 100,
  hotnessThreshold: 4,
  hotnessHalfLifeMs: 30_000,
  accessWeight: 1,
  routeHitWeight: 1,
  demandWeight: 0.5,
  maxTrackedChains: 4096,
  minLoadSkewTokens: 256,
  minLoadSkewRatio: 1.5,
  cooldownMs: 10_000,
  targetReserveBlocks: 8,
  leaseMs: 30_000,
  leaseRouteBonusTokens: 512,
  offloadIntoColderCache: false,
  foregroundReuseDiscount: 0.5,
  foregroundMaxReuse: 4,
  prefillMsPerToken: 0.02,
  fallbackFixedMs: 0,
  fallbackBytesPerMs: 3.7e8,
  hostFixedMs: 1,
  hostBytesPerMs: 2e5,
  interferenceFactor: 1,
  ewmaAlpha: 0.2,
  dataPath: "auto",
  ncclTimeoutMs: 30_000,
  ipcTimeoutMs: 10_000,
});

/** A partial config; a bare mode string means `{ mode }`. */
export type TransferConfigInput = TransferModeSetting | Partial<TransferConfig>;

const POSITIVE = ["ncclTimeoutMs", "ipcTimeoutMs", "safetyRatio", "hotnessHalfLifeMs", "placementIntervalMs", "foregroundDeadlineMs", "backgroundDeadlineMs", "fallbackBytesPerMs", "hostBytesPerMs", "prefillMsPerToken"] as const;
const INTEGER = ["minBatchBlocks", "foregroundMaxBlocks", "backgroundCopyMaxBlocks", "backgroundCopyBatchMaxBlocks", "maxTrackedChains", "targetReserveBlocks", "foregroundMaxReuse"] as const;

/** Fills defaults and validates; throws RangeError naming the bad field and value. */
export function resolveTransferConfig(input: TransferConfigInput = {}): TransferConfig {
  const partial = typeof input === "string" ? { mode: input } : input;
  const c: TransferConfig = { ...DEFAULT_TRANSFER_CONFIG, ...partial };
  if (!(TRANSFER_MODES as readonly string[]).includes(c.mode)) throw new RangeError(`transfers mode must be one of ${TRANSFER_MODES.join(", ")}, got ${JSON.stringify(c.mode)}`);
  if (!(DATA_PATHS as readonly string[]).includes(c.dataPath)) throw new RangeError(`transfers.dataPath must be one of ${DATA_PATHS.join(", ")}, got ${JSON.stringify(c.dataPath)}`);
  for (const [k, v] of Object.entries(c)) {
    if (k === "mode" || k === "dataPath" || k === "profile" || k === "residuals") continue;
    if (typeof DEFAULT_TRANSFER_CONFIG[k as keyof TransferConfig] === "boolean") {
      if (typeof v !== "boolean") throw new RangeError(`transfers.${k} must be a boolean, got ${String(v)}`);
      continue;
    }
    if (!(k in DEFAULT_TRANSFER_CONFIG)) throw new RangeError(`unknown transfers setting ${JSON.stringify(k)}`);
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new RangeError(`transfers.${k} must be a finite number >= 0, got ${String(v)}`);
  }
  for (const k of POSITIVE) if (!(c[k] > 0)) throw new RangeError(`transfers.${k} must be > 0, got ${c[k]}`);
  for (const k of INTEGER) if (!Number.isInteger(c[k]) || c[k] < 1) throw new RangeError(`transfers.${k} must be an integer >= 1, got ${c[k]}`);
  if (c.ewmaAlpha <= 0 || c.ewmaAlpha > 1) throw new RangeError(`transfers.ewmaAlpha must be in (0, 1], got ${c.ewmaAlpha}`);
  return c;
}
