// libzmq through Deno.dlopen: one KV-event batch crosses a PUB/SUB pair (inproc, so no network
// permission) and decodes. Where libzmq is missing the test is ignored and says why, except under
// CI=true, where .ci/run installed it and it must run.
import { libzmqUnavailable } from "../../ffi/zmq/libzmq.ts";
import { ZmqContext } from "../../ffi/zmq/zmq_socket.ts";
import { encodeEventBatch } from "../../lib/kv_events/event_batch.ts";
import { decodeEventBatch } from "../../lib/kv_events/subscriber/event_decoder.ts";
import { seqFrame } from "../../lib/kv_events/zmq_event_publisher.ts";

const missing = libzmqUnavailable();
const inCi = Deno.env.get("CI") === "true";
if (missing && !inCi) console.log(`test/deno/zmq.test.ts: skipping, ${missing}`);

Deno.test({
  name: "a KV-event batch crosses PUB/SUB through libzmq under Deno",
  ignore: missing !== undefined && !inCi,
  fn: async () => {
    if (missing) throw new Error(`CI=true, but libzmq does not load: ${missing}`);
    const ctx = new ZmqContext();
    try {
      const pub = ctx.socket("PUB");
      pub.bind("inproc://kv-events-deno");
      const sub = ctx.socket("SUB");
      sub.connect("inproc://kv-events-deno");
      sub.subscribe("");
      const payload = encodeEventBatch(1.5, [{ type: "BlockRemoved", blockHashes: [0xffffffffffffffffn] }], 0);
      let got: Uint8Array[] | null = null;
      for (let i = 0; i < 200 && !got; i++) {
        pub.send([new TextEncoder().encode("kv@p@m"), seqFrame(0n), payload]);
        await new Promise((r) => setTimeout(r, 5));
        got = sub.receive();
      }
      if (!got) throw new Error("nothing arrived on the SUB socket");
      const batch = decodeEventBatch(got[2]!);
      const e = batch.events[0];
      if (e?.type !== "BlockRemoved" || e.blockHashes[0] !== 0xffffffffffffffffn) {
        throw new Error(`decoded ${JSON.stringify(batch, (_, v) => (typeof v === "bigint" ? String(v) : v))}`);
      }
    } finally {
      ctx.dispose();
    }
  },
});
