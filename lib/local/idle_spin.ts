/**
 * How long a worker keeps its event loop turning after its last step (WorkerHost's idleSpinMs): a
 * control message that comes meanwhile (the next request, a transfer phase) is then read without
 * paying a wake-up from the I/O poller.
 * @module
 */
import { parseSetting, readSetting } from "../runtime/env.ts";

/** The GPU worker's default: its host has cores to spare. */
export const GPU_IDLE_SPIN_MS = 50;

/**
 * LMPOOL_IDLE_SPIN_MS (0 turns it off), else {@link GPU_IDLE_SPIN_MS} on the CUDA backend and 0 on
 * the CPU backend (its workers share the cores with the model).
 */
export function idleSpinMs(backend: string, text?: string): number {
  const ms = text === undefined ? readSetting("LMPOOL_IDLE_SPIN_MS") : parseSetting("LMPOOL_IDLE_SPIN_MS", text);
  return ms ?? (backend === "cuda" ? GPU_IDLE_SPIN_MS : 0);
}
