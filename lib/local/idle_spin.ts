/**
 * How long a worker keeps its event loop turning after its last step (WorkerHost's idleSpinMs): a
 * control message that comes meanwhile (the next request, a transfer phase) is then read without a
 * wake-up, which cost 0.1-0.3 ms per message on the GPU host.
 * @module
 */
import { getEnv } from "../runtime/env.ts";

/** The GPU worker's default: its host has cores to spare. */
export const GPU_IDLE_SPIN_MS = 50;

/**
 * LMPOOL_IDLE_SPIN_MS (0 turns it off), else {@link GPU_IDLE_SPIN_MS} on the CUDA backend and 0 on
 * the CPU backend (its workers share the cores with the model).
 */
export function idleSpinMs(backend: string, text: string | undefined = getEnv("LMPOOL_IDLE_SPIN_MS")): number {
  if (text === undefined || text === "") return backend === "cuda" ? GPU_IDLE_SPIN_MS : 0;
  const ms = Number(text);
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`LMPOOL_IDLE_SPIN_MS must be a number >= 0, got ${JSON.stringify(text)}`);
  return ms;
}
