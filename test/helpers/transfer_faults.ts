/**
 * Fault injection for transfer tests across processes: a text of `phase:role:kind` entries
 * (comma-separated), e.g. "execute:dst:hang,publish:dst:fail", applied by every worker started
 * through faulty_worker_main.ts to every plan.
 * @module
 */
import type {
  TransferFaultHook,
  TransferPhaseName,
  TransferRole,
} from "../../lib/transfer/worker/transfer_executor.ts";

const PHASES = ["prepare", "execute", "publish", "finalize", "abort"];

/** The fault hook `text` describes, or undefined for an empty text; RangeError names a bad entry. */
export function parseTransferFaults(text: string | undefined): TransferFaultHook | undefined {
  if (!text?.trim()) return undefined;
  const rules = text.split(",").map((part) => {
    const [phase, role, kind] = part.trim().split(":");
    if (!PHASES.includes(phase ?? "") || (role !== "src" && role !== "dst") || (kind !== "fail" && kind !== "hang")) {
      throw new RangeError(
        `bad transfer fault ${JSON.stringify(part)}; expected phase:role:kind with role src|dst and kind fail|hang`,
      );
    }
    return { phase: phase as TransferPhaseName, role: role as TransferRole, kind: kind as "fail" | "hang" };
  });
  return (phase, role) => rules.find((r) => r.phase === phase && r.role === role)?.kind;
}
