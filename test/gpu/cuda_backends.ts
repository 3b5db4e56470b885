/**
 * Opens the CUDA and CPU backends side by side for the GPU suites, or says why the suites skip.
 * @module
 */
import { Native } from "../../ffi/native.ts";

/** Both backends, or the reason the CUDA one is not usable here. */
export type Backends = { cuda: Native; cpu: Native } | { skip: string };

let opened: Backends | null = null;

/** Opens the backends once per process; prints the reason when the GPU suites skip. */
export function openBackends(): Backends {
  if (opened) return opened;
  try {
    const cuda = new Native({ backend: "cuda" });
    if (cuda.deviceCount() < 1) {
      opened = { skip: "the CUDA library loads but sees no device" };
    } else {
      opened = { cuda, cpu: new Native({ backend: "cpu" }) };
    }
  } catch (e) {
    opened = { skip: `no CUDA backend (${e instanceof Error ? e.message.replace(/\s*\n\s*/g, " ") : String(e)})` };
  }
  if ("skip" in opened) console.log(`test/gpu: skipping, ${opened.skip}`);
  return opened;
}
