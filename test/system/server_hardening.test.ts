// The real server process (examples/serve.ts) refusing what must be refused and failing to start
// the way a user can act on: one line naming the flag, no stack dump, the port checked before any
// model loads. Then two CPU ranks on one device (--gpus 0,0) behind the bounded ingress: body
// limit, float32 ranges, request time limits, the tokenizer pool, rank metrics and a bounded drain.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { tinyModelDir } from "../helpers/tiny_model_dir.ts";
import { metricValue, type ServerProcess, startServerProcess, stopServerProcess } from "./server_process.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));

// deno-lint-ignore no-explicit-any
type Json = any;

/** Runs serve.ts to its exit; its exit code, stdout and stderr. */
async function runToExit(
  args: string[],
  timeoutMs = 60_000,
): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const started = performance.now();
  const proc = Bun.spawn([process.execPath, "run", "examples/serve.ts", ...args], {
    cwd: REPO,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { code, stdout, stderr, ms: performance.now() - started };
}

function expectOneLine(stderr: string, ...parts: string[]): void {
  const lines = stderr.split("\n").filter((l) => l.trim() !== "");
  expect(lines).toHaveLength(1);
  for (const p of parts) expect(lines[0]).toContain(p);
  expect(stderr).not.toMatch(/^\s+at /m); // no stack frames
}

describe("start-up failures: one line naming the flag, non-zero exit", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await tinyModelDir();
  });

  test("a port in use is found before the model loads", async () => {
    const holder = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("taken") });
    try {
      const r = await runToExit(["--model", dir, "--backend", "cpu", "--port", String(holder.port)]);
      expect(r.code).toBe(1);
      expectOneLine(r.stderr, `--port ${holder.port}`, "in use");
      expect(r.stdout).not.toContain("Loading");
    } finally {
      holder.stop(true);
    }
  });

  test("--max-model-len above the model's names the flag and the model's limit", async () => {
    const r = await runToExit(["--model", dir, "--backend", "cpu", "--port", "0", "--max-model-len", "100000"]);
    expect(r.code).toBe(1);
    expectOneLine(r.stderr, "--max-model-len 100000", "at most");
    expect(r.stderr).not.toContain("maxModelLen");
  });

  test.skipIf(existsSync(`${REPO}build/liblmpool_cuda.so`))(
    "--backend cuda without the CUDA library says how to fix it",
    async () => {
      const r = await runToExit(["--model", dir, "--backend", "cuda", "--port", "0"]);
      expect(r.code).toBe(1);
      expectOneLine(r.stderr, "--backend cuda", "make native", "--backend cpu");
    },
  );

  test("while the model loads the port already answers: /health and the API are 503 loading", async () => {
    const proc = Bun.spawn([
      process.execPath,
      "run",
      "examples/serve.ts",
      "--model",
      dir,
      "--backend",
      "cpu",
      "--port",
      "0",
    ], { cwd: REPO, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    try {
      let out = "";
      const reader = proc.stdout.getReader();
      const dec = new TextDecoder();
      let url: string | undefined;
      while (!url) {
        const r = await reader.read();
        if (r.done) throw new Error(`server exited before listening: ${out}`);
        out += dec.decode(r.value, { stream: true });
        url = /Listening at (http:\/\/\S+)/.exec(out)?.[1];
      }
      const health = await fetch(`${url}/health`);
      const completion = await fetch(`${url}/v1/completions`, { method: "POST", body: "{}" });
      expect(health.status).toBe(503);
      expect(((await health.json()) as Json).error.type).toBe("ModelLoadingError");
      expect(completion.status).toBe(503);
      reader.releaseLock();
    } finally {
      proc.kill("SIGKILL");
      await proc.exited;
    }
  });

  test("a bad flag value exits 2 naming it", async () => {
    const r = await runToExit(["--gpus", "0,x"]);
    expect(r.code).toBe(2);
    expectOneLine(r.stderr, "--gpus");
  });
});

describe("two CPU ranks on one device behind the bounded ingress", () => {
  const KEY = "k";
  let server: ServerProcess;
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${server.url}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${KEY}`,
        "content-type": "application/json",
        ...(init.headers as Record<string, string>),
      },
    });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    api(path, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body), headers });
  const scrape = async () => (await api("/metrics")).text();

  beforeAll(async () => {
    const dir = await tinyModelDir();
    server = await startServerProcess([
      "--model",
      dir,
      "--port",
      "0",
      "--backend",
      "cpu",
      "--gpus",
      "0,0",
      "--api-key",
      KEY,
      "--max-model-len",
      "256",
      "--max-request-bytes",
      "200000",
      "--request-timeout",
      "60",
      "--drain-timeout",
      "0.2",
    ], 120_000);
  }, 150_000);

  afterAll(() => stopServerProcess(server));

  test("both ranks serve: /health 200, lmpool_rank_up per rank, lmpool_healthy_ranks 2", async () => {
    expect(server.output()).toContain("Listening at");
    expect((await api("/health")).status).toBe(200);
    let text = "";
    for (let i = 0; i < 100; i++) {
      text = await scrape();
      if (metricValue(text, "lmpool_healthy_ranks") === 2) break;
      await Bun.sleep(50);
    }
    expect(metricValue(text, "lmpool_healthy_ranks")).toBe(2);
    expect(metricValue(text, "lmpool_rank_up", { engine: "0" })).toBe(1);
    expect(metricValue(text, "lmpool_rank_up", { engine: "1" })).toBe(1);
    expect(metricValue(text, "lmpool_worker_restarts_total", { engine: "1" })).toBe(0);
    expect(text).not.toMatch(/lmpool_route_decisions_total\{[^}]*decision="healthy_ranks"/);
  });

  test("a body over --max-request-bytes is a 413 on every body route; the server goes on", async () => {
    const pad = "x".repeat(250_000);
    for (const path of ["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"]) {
      const res = await post(path, { prompt: pad });
      expect({ path, status: res.status }).toEqual({ path, status: 413 });
      expect(((await res.json()) as Json).error.type).toBe("RequestTooLargeError");
    }
    expect((await post("/v1/completions", { prompt: "still fine", max_tokens: 2 })).status).toBe(200);
  });

  test("floats out of float32 range are 400s and no rank dies of them", async () => {
    for (
      const [field, value] of [["temperature", 1e308], ["top_p", 1e-50], ["max_tokens", 2 ** 31], [
        "top_k",
        2 ** 40,
      ]] as const
    ) {
      const res = await post("/v1/completions", { prompt: "a", [field]: value });
      expect({ field, status: res.status }).toEqual({ field, status: 400 });
      expect(((await res.json()) as Json).error.param).toBe(field);
    }
    const ok = await post("/v1/completions", { prompt: "after", max_tokens: 2, temperature: 0.7, n: 4 });
    expect(ok.status).toBe(200);
    expect(metricValue(await scrape(), "lmpool_healthy_ranks")).toBe(2);
  });

  test("a prompt longer than any that fits max_model_len is refused before tokenizing; a long one that fits goes to the pool", async () => {
    const tooLong = await post("/tokenize", { prompt: "word ".repeat(39_000) });
    expect(tooLong.status).toBe(400);
    expect(((await tooLong.json()) as Json).error.code).toBe(400);
    const long = "ab cd ".repeat(10_000); // over the inline limit: tokenized on a pool thread
    const res = await post("/tokenize", { prompt: long });
    expect(res.status).toBe(200);
    expect(((await res.json()) as Json).count).toBeGreaterThan(1000);
  });

  test("x-request-timeout: 504 for a plain request; a stream ends with its error, usage and [DONE]", async () => {
    const body = { prompt: "count", max_tokens: 240, ignore_eos: true, n: 4 };
    const plain = await post("/v1/completions", body, { "x-request-timeout": "0.1" });
    expect(plain.status).toBe(504);
    expect(((await plain.json()) as Json).error.type).toBe("RequestTimeoutError");
    expect((await post("/v1/completions", body, { "x-request-timeout": "soon" })).status).toBe(400);
    const stream = await post("/v1/completions", { ...body, stream: true, stream_options: { include_usage: true } }, {
      "x-request-timeout": "0.1",
    });
    const sse = await stream.text();
    expect(sse.endsWith("data: [DONE]\n\n")).toBe(true);
    const events = sse.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    expect(events.at(-2).error.type).toBe("RequestTimeoutError");
    expect(events.at(-1).usage.completion_tokens).toBeLessThan(4 * 240);
    // The aborted requests leave no live blocks on either rank.
    let text = "";
    for (let i = 0; i < 100; i++) {
      text = await scrape();
      if (["0", "1"].every((e) => metricValue(text, "lmpool_kv_blocks", { engine: e, state: "live" }) === 0)) break;
      await Bun.sleep(20);
    }
    for (const e of ["0", "1"]) expect(metricValue(text, "lmpool_kv_blocks", { engine: e, state: "live" })).toBe(0);
  });

  // Last: it stops the server.
  test("SIGTERM with --drain-timeout 0.2: the open stream ends with a shutdown error and [DONE], exit 0", async () => {
    const res = await post("/v1/completions", {
      prompt: "long",
      max_tokens: 240,
      ignore_eos: true,
      n: 4,
      stream: true,
    });
    expect(res.status).toBe(200);
    const reading = res.text();
    await Bun.sleep(50);
    server.proc.kill("SIGTERM");
    const sse = await reading;
    expect(sse.endsWith("data: [DONE]\n\n")).toBe(true);
    const events = sse.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    expect(events.at(-1).error.type).toBe("ServerShutdownError");
    expect(await server.exited).toBe(0);
  });
});
