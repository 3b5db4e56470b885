// Free TCP ports for the KV-event sockets of a test: `count` consecutive ones (per-rank streams
// offset the port by the rank), found by listening on each for a moment.
import { createServer } from "node:net";

function free(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "0.0.0.0", () => s.close(() => resolve(true)));
  });
}

/** The first of `count` consecutive free ports, tried from a random start in 20000-59999. */
export async function freePortRun(count: number): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 40_000);
    let ok = true;
    for (let i = 0; i < count && ok; i++) ok = await free(base + i);
    if (ok) return base;
  }
  throw new Error(`no run of ${count} free ports found`);
}
