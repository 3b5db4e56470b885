// --kv-events-config as vLLM takes it (its fields, defaults and publisher rule), LMPool's
// granularity, refusals that name the field, and vLLM's endpoint rules (bind or connect, per-rank
// offsets).
import { expect, test } from "bun:test";
import { kvEventsEnabled, parseKvEventsConfig } from "../../../lib/kv_events/kv_events_config.ts";
import { bindsEndpoint, offsetEndpoint } from "../../../lib/kv_events/endpoints.ts";
import { ReplayBuffer } from "../../../lib/kv_events/replay_buffer.ts";
import { parseServeArgs } from "../../../lib/server/cli.ts";

test("vLLM's defaults; publisher follows enable_kv_cache_events", () => {
  const on = parseKvEventsConfig('{"enable_kv_cache_events": true}');
  expect(on).toEqual({
    enableKvCacheEvents: true,
    publisher: "zmq",
    endpoint: "tcp://*:5557",
    replayEndpoint: null,
    bufferSteps: 10_000,
    hwm: 100_000,
    maxQueueSize: 100_000,
    topic: "",
    granularity: "node",
  });
  expect(kvEventsEnabled(on)).toBe(true);
  expect(parseKvEventsConfig("{}").publisher).toBe("null");
  expect(kvEventsEnabled(parseKvEventsConfig('{"enable_kv_cache_events": true, "publisher": "null"}'))).toBe(false);
});

test("every vLLM field and LMPool's granularity are read", () => {
  const c = parseKvEventsConfig({
    enable_kv_cache_events: true,
    publisher: "zmq",
    endpoint: "tcp://scheduler:5557",
    replay_endpoint: "tcp://*:5558",
    buffer_steps: 32,
    hwm: 10,
    max_queue_size: 5,
    topic: "kv@10.0.0.1@Qwen/Qwen3-0.6B",
    granularity: "rank",
  });
  expect(c).toMatchObject({ replayEndpoint: "tcp://*:5558", bufferSteps: 32, hwm: 10, granularity: "rank" });
});

test("refusals name the field and the value", () => {
  expect(() => parseKvEventsConfig("{enable")).toThrow(/--kv-events-config must be a JSON object/);
  expect(() => parseKvEventsConfig('{"enable_kv_cache_event": true}')).toThrow(/unknown field "enable_kv_cache_event"/);
  expect(() => parseKvEventsConfig('{"publisher": "kafka"}')).toThrow(/publisher must be "zmq" or "null", got "kafka"/);
  expect(() => parseKvEventsConfig('{"endpoint": "5557"}')).toThrow(/endpoint must be a ZeroMQ endpoint/);
  expect(() => parseKvEventsConfig('{"buffer_steps": 0}')).toThrow(/buffer_steps must be an integer >= 1, got 0/);
  expect(() => parseKvEventsConfig('{"granularity": "pod"}')).toThrow(/granularity must be "node" or "rank"/);
  expect(() => parseKvEventsConfig('{"enable_kv_cache_events": "yes"}')).toThrow(TypeError);
  expect(() => parseServeArgs(["--kv-events-config", '{"hwm": -1}'])).toThrow(/--kv-events-config hwm/);
  expect(parseServeArgs(["--kv-events-config", '{"enable_kv_cache_events": true}']).kvEventsConfig?.publisher).toBe(
    "zmq",
  );
});

test("vLLM's endpoint rules: * and :: bind, a host connects; ranks offset the port", () => {
  expect(bindsEndpoint("tcp://*:5557")).toBe(true);
  expect(bindsEndpoint("tcp://[::]:5557")).toBe(true);
  expect(bindsEndpoint("ipc:///tmp/kv")).toBe(true);
  expect(bindsEndpoint("tcp://epp.llm-d.svc:5557")).toBe(false);
  expect(offsetEndpoint("tcp://*:5557", 0)).toBe("tcp://*:5557");
  expect(offsetEndpoint("tcp://*:5557", 3)).toBe("tcp://*:5560");
  expect(offsetEndpoint("tcp://host:5557", 1)).toBe("tcp://host:5558");
  expect(offsetEndpoint("inproc://kv", 2)).toBe("inproc://kv_dp2");
  expect(() => offsetEndpoint("tcp://*:*", 1)).toThrow(/needs a numeric port/);
});

test("the replay buffer keeps the last batches only", () => {
  const b = new ReplayBuffer(3);
  for (let s = 0n; s < 5n; s++) b.push(s, new Uint8Array([Number(s)]));
  expect([...b.from(0n)].map((x) => x.seq)).toEqual([2n, 3n, 4n]);
  expect([...b.from(4n)].map((x) => x.seq)).toEqual([4n]);
  expect([...b.from(9n)]).toEqual([]);
  expect(() => b.push(7n, new Uint8Array())).toThrow(/does not follow 4/);
});

test("values past what libzmq and the replay buffer take are refused by name", () => {
  expect(() => parseKvEventsConfig('{"hwm": 3000000000}')).toThrow(/hwm must be at most 2147483647, got 3000000000/);
  expect(() => parseKvEventsConfig('{"buffer_steps": 5000000000}')).toThrow(/buffer_steps must be at most 4294967295/);
});
