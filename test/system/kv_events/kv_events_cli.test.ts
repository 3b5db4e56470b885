// `--kv-events-config` through examples/serve.ts, as a user starts it. Without libzmq (here:
// LMPOOL_LIBZMQ pointing nowhere) start-up fails with one line that says to install it; this runs
// on every machine. With libzmq and Debian's python3-zmq, a real server of two CPU ranks publishes
// to the strict Python consumer under llm-d's topic form, and /metrics leads the families llm-d
// reads with the node's series.
import { afterAll, describe, expect, test } from "bun:test";
import { fileURLToPath } from "node:url";
import { tinyModelDir } from "../../helpers/tiny_model_dir.ts";
import { libzmqMissing, pythonWithZmq, unavailableSuite } from "../../helpers/system_libraries.ts";
import { type ServerProcess, startTinyServer, stopServerProcess } from "../server_process.ts";
import { PythonConsumer } from "./consumers.ts";
import { freePortRun } from "./free_ports.ts";

const REPO = fileURLToPath(new URL("../../../", import.meta.url));
const MODEL = "tiny-cli";
const POD = "10.1.2.3:8000";

test("with events on and libzmq missing, start-up fails with one line saying to install it", async () => {
  const proc = Bun.spawn([
    process.execPath,
    "run",
    "examples/serve.ts",
    "--model",
    await tinyModelDir(),
    "--port",
    "0",
    "--backend",
    "cpu",
    "--kv-events-config",
    '{"enable_kv_cache_events": true, "publisher": "zmq"}',
  ], {
    cwd: REPO,
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, LMPOOL_LIBZMQ: "/nonexistent/libzmq.so.5" },
  });
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  expect(code).toBe(1);
  const lines = err.trim().split("\n");
  expect(lines.length).toBe(1);
  expect(lines[0]).toMatch(/^serve: start-up failed: --kv-events-config is set, but KV events need libzmq/);
  expect(lines[0]).toContain("apt-get install libzmq5");
}, 60_000);

const missing = libzmqMissing();
const python = pythonWithZmq();
if (missing) unavailableSuite("serve.ts with --kv-events-config", missing);
else if ("missing" in python) unavailableSuite("serve.ts with --kv-events-config", python.missing);
else {
  describe("serve.ts with --kv-events-config, two CPU ranks", () => {
    let server: ServerProcess | undefined;
    afterAll(() => stopServerProcess(server));

    test("the strict Python consumer reads its events; /metrics leads with the node", async () => {
      const port = await freePortRun(2);
      server = await startTinyServer([
        "--gpus",
        "2",
        "--served-model-name",
        MODEL,
        "--kv-events-config",
        JSON.stringify({
          enable_kv_cache_events: true,
          publisher: "zmq",
          endpoint: `tcp://*:${port}`,
          replay_endpoint: `tcp://*:${port + 1}`,
          topic: `kv@${POD}@${MODEL}`,
        }),
      ]);
      expect(server.output()).toContain(
        `KV events (node) on tcp://0.0.0.0:${port}, replay on tcp://0.0.0.0:${port + 1}`,
      );
      const specs = [{
        name: "node",
        endpoint: `tcp://127.0.0.1:${port}`,
        replay: `tcp://127.0.0.1:${port + 1}`,
        rank: 0,
      }];
      const py = await PythonConsumer.start(
        python.path,
        specs,
        { blockSize: 16, pod: POD, model: MODEL, topicFilter: "kv@" },
        `/tmp/lmpool-kv-cli-${process.pid}.json`,
      );
      try {
        const prompt = Array.from({ length: 70 }, (_, i) => 100 + i); // four full blocks
        for (let i = 0; i < 2; i++) {
          const res = await fetch(`${server.url}/v1/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model: MODEL, prompt, max_tokens: 4, temperature: 0 }),
          });
          expect(res.status).toBe(200);
        }
        // The stream's batches are numbered from 0: wait for the first and read what it holds.
        let report = await py.report({ node: 0 });
        for (let i = 0; i < 50 && report.node!.blocks.length < 4; i++) {
          await Bun.sleep(50);
          report = await py.report({ node: report.node!.lastSeq });
        }
        expect(report.node!.blocks.length).toBeGreaterThanOrEqual(4);
        const metrics = await (await fetch(`${server.url}/metrics`)).text();
        for (const family of ["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"]) {
          expect(metrics).toContain(`${family}{model_name="${MODEL}"} `);
        }
        expect(metrics).toMatch(
          /vllm:cache_config_info\{model_name="tiny-cli",block_size="16",num_gpu_blocks="\d+"\} 1/,
        );
      } finally {
        await py.stop();
      }
    }, 90_000);
  });
}
