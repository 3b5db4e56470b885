/**
 * Every case of `bun bench faults`, in the order the suite runs them: one table of (name,
 * description, run function), so that one case can run alone (`--cases name`).
 * @module
 */
import { badFloatsCase } from "./cases/bad_floats.ts";
import { disconnectPrefillCase, disconnectStreamCase, disconnectTransferCase } from "./cases/client_disconnect.ts";
import { killControlPlaneCase } from "./cases/control_plane_kill.ts";
import { largeBodyCase } from "./cases/large_body.ts";
import { launcherSigkillCase, launcherSigtermCase } from "./cases/launcher_signals.ts";
import { longPromptCase } from "./cases/long_prompt.ts";
import { killWorkerRepeatedCase } from "./cases/repeated_kill.ts";
import { soakCase } from "./cases/soak.ts";
import { killWorkerDecodeCase, killWorkerPrefillCase, killWorkerTransferCase } from "./cases/worker_kill.ts";
import { stopWorkerCase } from "./cases/worker_stop.ts";
import type { FaultCase } from "./fault_case.ts";

/** The suite, in run order. */
export const FAULT_CASES: readonly FaultCase[] = [
  largeBodyCase,
  badFloatsCase,
  longPromptCase,
  killWorkerPrefillCase,
  killWorkerDecodeCase,
  killWorkerTransferCase,
  killControlPlaneCase,
  stopWorkerCase,
  killWorkerRepeatedCase,
  launcherSigtermCase,
  launcherSigkillCase,
  disconnectPrefillCase,
  disconnectStreamCase,
  disconnectTransferCase,
  soakCase,
];

/** The case named `name`; a RangeError listing the names otherwise. */
export function faultCase(name: string): FaultCase {
  const c = FAULT_CASES.find((x) => x.name === name);
  if (!c) {
    throw new RangeError(
      `unknown fault case ${JSON.stringify(name)}; cases: ${FAULT_CASES.map((x) => x.name).join(", ")}`,
    );
  }
  return c;
}
