// The fault suite's reading of /metrics and /health: the exposition parser, the drain-then-leak
// wait and the recovery timer, against a real local HTTP server whose metrics the test scripts
// (a double of the LMPool server, inside this module's unit tests only).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { MetricsSnapshot, parsePrometheusText } from "../../../bench/faults/prometheus_text.ts";
import { measureRecovery, restartsOf } from "../../../bench/faults/recovery.ts";
import { METRIC, ServerWatch } from "../../../bench/faults/server_watch.ts";

const TEXT = `# HELP lmpool_healthy_ranks Ranks serving.
# TYPE lmpool_healthy_ranks gauge
lmpool_healthy_ranks{model_name="m"} 2
lmpool_rank_up{model_name="m",engine="0"} 1
lmpool_rank_up{model_name="m",engine="1"} 0
lmpool_worker_restarts_total{model_name="m",engine="1"} 3
vllm:num_requests_running{model_name="m",engine="0"} 4
vllm:num_requests_running{model_name="m",engine="1"} 1
weird_label{path="a \\"quoted\\" \\\\ b"} NaN
plain_metric 7
`;

test("the exposition parser reads names, labels (escapes included) and values; lookups sum and select", () => {
  const samples = parsePrometheusText(TEXT);
  expect(samples.find((s) => s.name === "weird_label")?.labels.path).toBe('a "quoted" \\ b');
  expect(samples.find((s) => s.name === "plain_metric")).toEqual({ name: "plain_metric", labels: {}, value: 7 });
  const s = new MetricsSnapshot(TEXT, 0);
  expect(s.value(METRIC.healthyRanks)).toBe(2);
  expect(s.value(METRIC.rankUp, { engine: "1" })).toBe(0);
  expect(s.sum(METRIC.running)).toBe(5);
  expect(s.sum("absent")).toBeUndefined();
  expect(s.has(METRIC.leakedBlocks)).toBe(false);
  expect(restartsOf(s, 1)).toBe(3);
  expect(restartsOf(s, 0)).toBe(0);
  expect(restartsOf(null, 0)).toBe(0);
});

// The double's state, scripted by each test.
const state = { metrics: "", health: 200, probeOk: true };
let server: ReturnType<typeof Bun.serve>;
let watch: ServerWatch;

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === "/metrics") return new Response(state.metrics);
      if (path === "/health") return new Response("", { status: state.health });
      await req.text();
      return state.probeOk
        ? Response.json({ choices: [{ index: 0, text: "ok", finish_reason: "length" }] })
        : Response.json({ error: { message: "no rank serves", type: "server_error" } }, { status: 503 });
    },
  });
  watch = new ServerWatch(`http://127.0.0.1:${server.port}`, "m", 2);
});
afterAll(() => server.stop(true));

const gauges = (healthy: number, up1: number, extra = "") =>
  `lmpool_healthy_ranks ${healthy}\nlmpool_rank_up{engine="0"} 1\nlmpool_rank_up{engine="1"} ${up1}\n${extra}`;

test("leaks are read once the work drains; a missing gauge and work that never drains are said plainly", async () => {
  state.metrics = `${gauges(2, 1)}vllm:num_requests_running{engine="0"} 1\nlmpool_kv_leaked_blocks{engine="0"} 5\n`;
  setTimeout(
    () => (state.metrics = `${
      gauges(2, 1)
    }vllm:num_requests_running{engine="0"} 0\nlmpool_kv_leaked_blocks{engine="0"} 0\nlmpool_kv_leaked_blocks{engine="1"} 0\n`),
    300,
  );
  expect(await watch.leakedAfterDrain(3000, 500)).toEqual({ drained: true, leaked: 0, reason: "" });

  state.metrics = `${gauges(2, 1)}lmpool_kv_leaked_blocks{engine="1"} 7\n`;
  expect((await watch.leakedAfterDrain(1000, 300)).leaked).toBe(7);

  state.metrics = gauges(2, 1);
  expect(await watch.leakedAfterDrain(1000, 300)).toEqual({
    drained: true,
    leaked: null,
    reason: "/metrics has no lmpool_kv_leaked_blocks",
  });

  state.metrics = `${gauges(2, 1)}vllm:num_requests_waiting{engine="1"} 2\n`;
  const stuck = await watch.leakedAfterDrain(400, 100);
  expect(stuck.drained).toBe(false);
  expect(stuck.reason).toContain("did not drain within 400 ms");
});

test("recovery: detection when the rank goes down, serving again once every rank is up and a probe answers", async () => {
  state.metrics = gauges(2, 1);
  state.probeOk = true;
  const at = performance.now();
  setTimeout(() => (state.metrics = gauges(1, 0)), 300);
  setTimeout(() => (state.metrics = gauges(2, 1)), 900);
  const downTest = (s: MetricsSnapshot | null) => s?.value(METRIC.rankUp, { engine: "1" }) === 0;
  const r = await measureRecovery(watch, at, downTest, 5000);
  expect(r.note).toBe("");
  expect(r.detectMs!).toBeGreaterThanOrEqual(250);
  expect(r.detectMs!).toBeLessThan(900);
  expect(r.serveAgainMs!).toBeGreaterThanOrEqual(850);
  expect(r.serveAgainMs!).toBeLessThan(3000);
});

test("recovery names what is missing: no detection, no return to full capacity, no healthy-ranks gauge", async () => {
  state.metrics = gauges(2, 1);
  const never = await measureRecovery(watch, performance.now(), () => false, 400);
  expect(never).toEqual({ detectMs: null, serveAgainMs: null, note: "fault not detected within 400 ms" });

  state.metrics = gauges(1, 0);
  const stuck = await measureRecovery(watch, performance.now(), () => true, 400);
  expect(stuck.detectMs).not.toBeNull();
  expect(stuck.note).toBe("not back to 2 healthy ranks with a probe answered within 400 ms");

  state.metrics = "vllm:num_requests_running 0\n";
  const blind = await measureRecovery(watch, performance.now(), (_s, health) => health !== 200, 400);
  expect(blind.note).toBe("fault not detected within 400 ms (/metrics has no lmpool_healthy_ranks)");

  state.metrics = gauges(2, 1);
  state.probeOk = false;
  const noProbe = await measureRecovery(watch, performance.now(), () => true, 600);
  expect(noProbe.serveAgainMs).toBeNull();
  state.probeOk = true;
});
