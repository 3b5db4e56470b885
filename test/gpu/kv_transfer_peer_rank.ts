/**
 * One rank of the two-process transfer scenario of kv_transfer_peer.test.ts (not a test file):
 * `bun test/gpu/kv_transfer_peer_rank.ts <rank>` runs on device <rank>. Messages to the other rank
 * go out on stdout as {"to": "peer", "msg": ...} and come in on stdin, relayed by the test (the
 * way the control plane relays the NCCL unique id); results go out as {"result", "ok", "detail"}.
 * @module
 */
import { createInterface } from "node:readline";
import { NativeError } from "../../lib/core/errors.ts";
import { KvTransferEngine, type NcclPair, type PeerCopyModeName } from "../../ffi/kv_transfer.ts";
import { native } from "../../ffi/native.ts";
import { NcclDataPath } from "../../lib/transfer/paths/nccl/nccl_data_path.ts";
import { tinyConfig } from "../helpers/random_model.ts";

type Msg = Record<string, unknown>;
const rank = Number(process.argv[2]) as 0 | 1;
const peer = (1 - rank) as 0 | 1;

const inbox: Msg[] = [];
let wake: (() => void) | null = null;
createInterface({ input: process.stdin }).on("line", (line) => {
  inbox.push(JSON.parse(line) as Msg);
  wake?.();
});
async function recv(): Promise<Msg> {
  while (inbox.length === 0) await new Promise<void>((r) => (wake = r));
  return inbox.shift()!;
}
const out = (x: Msg) => process.stdout.write(JSON.stringify(x) + "\n");
const send = (msg: Msg) => out({ to: "peer", msg });
const report = (result: string, ok: boolean, detail = "") => out({ result: `rank ${rank}: ${result}`, ok, detail });
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const unhex = (s: unknown) => new Uint8Array(Buffer.from(String(s), "hex"));

const lib = native();
lib.setDevice(rank);
const xfer = new KvTransferEngine(lib);
// 4 layers x 8 heads x 128 x 256 tokens: 512 KiB chunks, 4 MiB blocks (a 256-block send is 1 GiB).
const model = lib.createModel(
  tinyConfig({ arch: "qwen3", tie: true, seed: 1, numLayers: 4, numHeads: 8, numKvHeads: 8, headDim: 128 }),
);
const NUM_BLOCKS = 300;
const kv = model.createKvCache(NUM_BLOCKS, 256);
// Block lists both ranks know: rank r sends from SEND[r] and receives into RECV[r].
const SEND = [[5, 17, 3, 250, 99, 123, 64], [42, 7, 280, 11, 64, 200, 1]];
const RECV = [[8, 140, 33, 2, 271, 180, 90], [9, 77, 13, 260, 150, 31, 44]];

function waitOk(job: { waitSync(ms: number): boolean }, what: string): void {
  if (!job.waitSync(20_000)) throw new Error(`${what}: not complete after 20 s`);
}

async function oneWay(pair: NcclPair, from: 0 | 1, seed: bigint, name: string): Promise<void> {
  if (rank === from) {
    xfer.fillPattern(kv, SEND[rank]!, seed);
    using job = pair.send(kv, SEND[rank]!);
    waitOk(job, name);
  } else {
    using job = pair.recv(kv, RECV[rank]!);
    waitOk(job, name);
    const bad = xfer.countPatternMismatches(kv, RECV[rank]!, seed);
    report(name, bad === 0, `${bad} words differ`);
  }
}

async function ipc(): Promise<void> {
  if (rank === 1) {
    send({ ipc: hex(xfer.exportKv(kv)) });
    for (;;) {
      const m = await recv();
      if (m.check) send({ checked: xfer.countPatternMismatches(kv, m.check as number[], BigInt(String(m.seed))) });
      else if (m.fill) {
        xfer.fillPattern(kv, m.fill as number[], BigInt(String(m.seed)));
        send({ filled: true });
      } else if (m.ipcDone) return;
    }
  }
  using view = xfer.openRemoteKv(unhex((await recv()).ipc), kv, NUM_BLOCKS);
  let seed = 300n;
  for (const mode of ["kernel", "copyEngineDirect", "copyEngine"] as PeerCopyModeName[]) {
    seed++;
    xfer.fillPattern(kv, SEND[0]!, seed);
    using job = xfer.peerCopy(kv, SEND[0]!, view, RECV[1]!, mode);
    waitOk(job, `ipc push ${mode}`);
    send({ check: RECV[1], seed: String(seed) });
    const bad = Number((await recv()).checked);
    report(`CUDA IPC push (${mode}) into the peer's cache`, bad === 0, `${bad} words differ`);
  }
  send({ fill: SEND[1], seed: "400" });
  await recv();
  using pull = xfer.peerCopy(view, SEND[1]!, kv, RECV[0]!, "kernel");
  waitOk(pull, "ipc pull");
  const bad = xfer.countPatternMismatches(kv, RECV[0]!, 400n);
  report("CUDA IPC pull (kernel) from the peer's cache", bad === 0, `${bad} words differ`);
  send({ ipcDone: true });
}

async function stuckPeer(pair: NcclPair): Promise<void> {
  if (rank === 1) {
    await recv(); // rank 0 has given up on its send
    pair.abort();
    pair.dispose();
    report("pair aborted and disposed after the peer gave up", true);
    return;
  }
  const big = Array.from({ length: 256 }, (_, i) => i);
  const job = pair.send(kv, big);
  const t0 = performance.now();
  const done = job.waitSync(1000);
  report(
    "a send nobody receives times out instead of hanging",
    !done,
    `waited ${(performance.now() - t0).toFixed(0)} ms`,
  );
  pair.abort();
  let failed = "";
  try {
    job.waitSync(5000);
  } catch (e) {
    failed = e instanceof NativeError ? e.message : String(e);
  }
  report("its job fails after abort", /aborted/.test(failed), failed);
  job.dispose();
  send({ aborted: true });
  const t1 = performance.now();
  pair.dispose();
  report("the aborted pair disposes", true, `${(performance.now() - t1).toFixed(0)} ms`);
}

function createTimeout(): void {
  if (rank !== 0) return;
  const t0 = performance.now();
  let status = 0;
  try {
    xfer.createPair(xfer.ncclUniqueId(), 0, 0, { timeoutMs: 1500 }).dispose();
  } catch (e) {
    status = e instanceof NativeError ? e.status : 0;
  }
  const ms = performance.now() - t0;
  report(
    "joining a pair nobody else joins fails with a timeout",
    status === -8 && ms < 15_000,
    `status ${status} after ${ms.toFixed(0)} ms`,
  );
}

async function main(): Promise<void> {
  let id: Uint8Array;
  if (rank === 0) {
    id = xfer.ncclUniqueId();
    send({ id: hex(id) });
  } else {
    id = unhex((await recv()).id);
  }
  const pair = xfer.createPair(id, rank, rank, { timeoutMs: 30_000 });
  report("pair created and warmed", true);
  await oneWay(pair, 0, 101n, "0 -> 1 send/recv is byte-exact");
  await oneWay(pair, 1, 102n, "1 -> 0 send/recv is byte-exact");

  // Both directions at once (one communicator per direction, so neither waits for the other).
  xfer.fillPattern(kv, SEND[rank]!, 103n + BigInt(rank));
  const jobs = [pair.send(kv, SEND[rank]!), pair.recv(kv, RECV[rank]!)];
  for (const j of jobs) waitOk(j, "both directions");
  jobs.forEach((j) => j.dispose());
  const bad = xfer.countPatternMismatches(kv, RECV[rank]!, 103n + BigInt(peer));
  report("both directions at once are byte-exact", bad === 0, `${bad} words differ`);

  // Two plans in one direction, posted back to back, match in order (0.5 MiB segments: the
  // staging ring wraps many times).
  const planA = rank === 0 ? [5, 17, 3] : [9, 77, 13], planB = rank === 0 ? [270, 271, 272, 273] : [260, 150, 31, 44];
  if (rank === 0) {
    xfer.fillPattern(kv, planA, 110n);
    xfer.fillPattern(kv, planB, 111n);
  }
  const seg = 512 << 10;
  const plans = rank === 0
    ? [pair.send(kv, planA, seg), pair.send(kv, planB, seg)]
    : [pair.recv(kv, planA, seg), pair.recv(kv, planB, seg)];
  for (const j of plans) waitOk(j, "ordered plans");
  plans.forEach((j) => j.dispose());
  if (rank === 1) {
    const bad2 = xfer.countPatternMismatches(kv, planA, 110n) + xfer.countPatternMismatches(kv, planB, 111n);
    report("plans posted back to back match in order", bad2 === 0, `${bad2} words differ`);
  }

  // The executor's data path over the same pair: a plan's execute on both sides.
  {
    const path = new NcclDataPath(kv, new Map([[peer, pair]]), { timeoutMs: 20_000 });
    const job = {
      planId: "p1",
      peerRank: peer,
      srcBlocks: Int32Array.from(SEND[0]!),
      dstBlocks: Int32Array.from(RECV[1]!),
    };
    if (rank === 0) {
      xfer.fillPattern(kv, SEND[0]!, 120n);
      await path.send(job);
    } else {
      const bytes = await path.receive(job);
      const bad3 = xfer.countPatternMismatches(kv, RECV[1]!, 120n);
      report(
        "NcclDataPath send/receive of a plan is byte-exact",
        bad3 === 0 && bytes === SEND[0]!.length * kv.blockBytes,
        `${bad3} words differ, ${bytes} bytes`,
      );
    }
  }

  await ipc();
  await stuckPeer(pair);
  createTimeout();
  kv.dispose();
  model.dispose();
  out({ done: true });
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    report("scenario", false, e instanceof Error ? `${e.message}\n${e.stack}` : String(e));
    out({ done: true });
    process.exit(1);
  },
);
