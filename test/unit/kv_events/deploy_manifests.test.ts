// The Kubernetes manifests and the llm-d example cannot run here (no cluster), so this holds them to
// each other and to the server: the pod's arguments parse as serve.ts parses them, its KV-event
// ports are the ones it declares and the endpoint picker subscribes to, its topic is llm-d's form
// with the model the picker hashes under, and the InferencePool selects these pods on their port.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { parseServeArgs } from "../../../lib/server/cli.ts";
import { parseTopic } from "../../../lib/kv_events/subscriber/event_decoder.ts";

// deno-lint-ignore no-explicit-any
type Yaml = any;
const read = (path: string): Yaml[] => {
  const docs = Bun.YAML.parse(readFileSync(new URL(`../../../${path}`, import.meta.url), "utf8"));
  return Array.isArray(docs) ? docs : [docs];
};

test("the pods, the InferencePool and the endpoint picker's subscription agree", () => {
  const [deployment] = read("deploy/kubernetes/lmpool-deployment.yaml");
  const [pool, route] = read("deploy/llm-d/inferencepool.yaml");
  const [epp] = read("deploy/llm-d/epp-config.yaml");
  const pod = deployment.spec.template;
  const c = pod.spec.containers[0];
  const args = (c.args as string[]).map((a) => a.replaceAll("$(POD_IP)", "10.0.0.1"));
  const cli = parseServeArgs(args);
  const kv = cli.kvEventsConfig!;
  expect(kv).toMatchObject({ enableKvCacheEvents: true, publisher: "zmq", granularity: "node" });
  expect(c.env.find((e: Yaml) => e.name === "POD_IP").valueFrom.fieldRef.fieldPath).toBe("status.podIP");

  const port = (name: string) => c.ports.find((p: Yaml) => p.name === name).containerPort;
  expect(kv.endpoint).toBe(`tcp://*:${port("kv-events")}`);
  expect(kv.replayEndpoint).toBe(`tcp://*:${port("kv-replay")}`);
  expect(cli.port).toBe(port("http"));
  expect(Number(c.resources.limits["nvidia.com/gpu"])).toBe(cli.gpus as number);
  for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe]) {
    expect(probe.httpGet).toEqual({ path: "/health", port: "http" });
  }

  const producer = epp.plugins.find((p: Yaml) => p.type === "precise-prefix-cache-producer").parameters;
  const tokens = epp.plugins.find((p: Yaml) => p.type === "token-producer").parameters;
  expect(producer.kvEventsConfig.podDiscoveryConfig).toEqual({
    socketPort: port("kv-events"),
    replaySocketPort: port("kv-replay"),
  });
  expect(kv.topic.startsWith(producer.kvEventsConfig.topicFilter)).toBe(true);
  expect(parseTopic(kv.topic)).toEqual({ pod: `10.0.0.1:${cli.port}`, model: tokens.modelName });
  expect(cli.servedModelName).toBe(tokens.modelName);
  expect(epp.plugins.find((p: Yaml) => p.type === "prefix-cache-scorer").parameters.prefixMatchInfoProducerName)
    .toBe("precise-prefix-cache-producer");

  expect(pool.kind).toBe("InferencePool");
  expect(pool.spec.selector.matchLabels).toEqual(pod.metadata.labels);
  expect(deployment.spec.selector.matchLabels).toEqual(pod.metadata.labels);
  expect(pool.spec.targetPorts).toEqual([{ number: cli.port }]);
  expect(route.spec.rules[0].backendRefs[0]).toMatchObject({ kind: "InferencePool", name: pool.metadata.name });
});
