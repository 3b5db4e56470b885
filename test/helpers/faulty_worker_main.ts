/**
 * A worker entry for tests: the production worker (lib/processes/worker_main.ts) with transfer
 * faults injected into every plan, as LMPOOL_TEST_TRANSFER_FAULTS lists them (see
 * transfer_faults.ts). Tests start it with LLMEngine's `workerMain` option.
 * @module
 */
import { workerProcessMain } from "../../lib/processes/worker_main.ts";
import { parseTransferFaults } from "./transfer_faults.ts";

// The worker inherits the test's environment.
await workerProcessMain({ transferFaults: parseTransferFaults(process.env.LMPOOL_TEST_TRANSFER_FAULTS) });
