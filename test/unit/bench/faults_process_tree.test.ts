// /proc scanning of the fault suite against real processes: a shell with two sleeping children
// and a fake "worker" whose command line carries worker_main.ts and its JSON argument.
import { afterEach, expect, test } from "bun:test";
import {
  descendantsOf,
  findControlPlane,
  findWorkers,
  isAlive,
  parseWorkerCmdline,
  rssKiB,
  signalPid,
  survivors,
} from "../../../bench/faults/process_tree.ts";

const spawned: Bun.Subprocess[] = [];
afterEach(() => {
  for (const p of spawned.splice(0)) p.kill("SIGKILL");
});

async function waitFor(test: () => boolean, ms = 5000): Promise<void> {
  const until = performance.now() + ms;
  while (!test() && performance.now() < until) await Bun.sleep(20);
}

test("worker command lines give their rank and socket directory; others are not workers", () => {
  expect(
    parseWorkerCmdline(
      `bun run /r/lib/processes/worker_main.ts {"rank":3,"epoch":1,"launcherSocketPath":"/tmp/lmpool-ab12/launcher.sock"}`,
    ),
  )
    .toEqual({ rank: 3, socketDir: "/tmp/lmpool-ab12" });
  expect(parseWorkerCmdline(`bun run worker_main.ts {"rank":0}`)).toEqual({ rank: 0, socketDir: null });
  expect(parseWorkerCmdline(`bun run control_main.ts {"rank":0}`)).toBeNull();
});

test("descendants, workers and the control plane of a real process tree; survivors after a kill", async () => {
  // Each inner shell keeps its arguments (the markers) in /proc/<pid>/cmdline while its sleep runs.
  const script = `sh -c 'sleep 30; true' worker_main.ts '{"rank":1}' & sh -c 'sleep 30; true' control_main.ts & wait`;
  const root = Bun.spawn(["sh", "-c", script], { stdout: "ignore", stderr: "ignore" });
  spawned.push(root);
  await waitFor(() => descendantsOf(root.pid).length >= 4);
  const kids = descendantsOf(root.pid);
  expect(kids.length).toBe(4);
  expect(kids.every((k) => isAlive(k.pid) && (rssKiB(k.pid) ?? 0) > 0)).toBe(true);
  await waitFor(() => findControlPlane(root.pid) !== null && findWorkers(root.pid).length === 1);
  expect(findControlPlane(root.pid)).not.toBeNull();
  const workers = findWorkers(root.pid);
  expect(workers.map((w) => w.rank)).toEqual([1]);

  expect(survivors(kids).length).toBe(kids.length);
  for (const k of kids) expect(signalPid(k.pid, "SIGKILL")).toBe(true);
  await waitFor(() => survivors(kids).length === 0);
  expect(survivors(kids)).toEqual([]);
  expect(rssKiB(kids[0]!.pid)).toBeNull();
  root.kill("SIGKILL");
  await root.exited;
  expect(signalPid(root.pid, "SIGTERM")).toBe(false);
});
