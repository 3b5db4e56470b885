/**
 * Multi-turn sessions: `sessions` conversations of `turns` turns. Turn 1's prompt is a system
 * prompt plus a user message; turn k+1's prompt is turn k's prompt, turn k's answer and a new
 * user message, so each turn extends the previous one. The answer is a stand-in of `answerTokens`
 * seeded tokens (the trace is fixed before anything runs, as in replayed chat logs); the engine
 * can reuse the previous turn's prompt blocks. Turns carry a session id: the driver runs a
 * session's turns in order, each after the previous finished. Requests are listed turn-major
 * (every session's turn 1, then turn 2, ...).
 * @module
 */
import { SeededRandom } from "./prng.ts";
import { positiveInt, requestId, type Workload, type WorkloadOptions, type WorkloadRequest } from "./types.ts";

/** Parameters of the multi-turn workload. */
export interface MultiTurnOptions extends WorkloadOptions {
  sessions?: number;
  turns?: number;
  systemPromptTokens?: number;
  userTokens?: [number, number];
  answerTokens?: number;
  maxInFlight?: number;
}

/** Builds the multi-turn workload. */
export function multiTurnWorkload(options: MultiTurnOptions = {}): Workload {
  const seed = options.seed ?? 0;
  const sessions = positiveInt("sessions", options.sessions ?? 16);
  const turns = positiveInt("turns", options.turns ?? 4);
  const systemPromptTokens = positiveInt("systemPromptTokens", options.systemPromptTokens ?? 512);
  const [userMin, userMax] = options.userTokens ?? [32, 256];
  const answerTokens = positiveInt("answerTokens", options.answerTokens ?? 64);
  const maxTokenId = options.maxTokenId ?? 10000;
  const rng = new SeededRandom(seed);
  const history = Array.from({ length: sessions }, () => rng.tokens(systemPromptTokens, 0, maxTokenId));
  const requests: WorkloadRequest[] = [];
  for (let t = 0; t < turns; t++) {
    for (let s = 0; s < sessions; s++) {
      const h = history[s] as number[];
      h.push(...rng.tokens(rng.int(userMin, userMax), 0, maxTokenId));
      requests.push({
        id: requestId("multi-turn", requests.length),
        promptTokenIds: [...h],
        maxTokens: answerTokens,
        ignoreEos: true,
        sessionId: `session-${s}`,
        phase: `turn-${t + 1}`,
      });
      h.push(...rng.tokens(answerTokens, 0, maxTokenId));
    }
  }
  return {
    name: "multi-turn",
    description:
      `${sessions} sessions x ${turns} turns, system ${systemPromptTokens}, user ${userMin}..${userMax}, answers ${answerTokens}`,
    seed,
    params: { sessions, turns, systemPromptTokens, userTokens: [userMin, userMax], answerTokens, maxTokenId },
    settings: { maxInFlight: options.maxInFlight ?? sessions, blockSize: options.blockSize ?? 256 },
    requests,
  };
}
