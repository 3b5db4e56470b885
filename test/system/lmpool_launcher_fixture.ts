// A launcher process for the orphan test: starts a 2-worker engine, prints the children's pids as
// one JSON line, then idles until it is killed.
import { LLMEngine } from "../../lib/engine/llm_engine.ts";

const model = process.argv[2]!;
const engine = await LLMEngine.create({
  model,
  worldSize: 2,
  numBlocks: 64,
  maxModelLen: 256,
  topology: "none",
  log: null,
});
const p = engine.processes;
console.log(JSON.stringify({ control: p.controlPid, workers: [p.workerPid(0), p.workerPid(1)] }));
setInterval(() => {}, 1 << 30);
