/**
 * The hook through which something outside routing adjusts the policy's choice: the transfer
 * layer's placement leases send a prefix to the rank a background copy was made for. Defined here,
 * beside the scheduler that calls it, so routing never imports the transfer layer.
 * @module
 */
import type { RouteChoice, RoutingContext } from "./routing_context.ts";

/** Adjusts a policy's choice (GlobalScheduler calls it after the policy). */
export interface RouteAdvisor {
  /** A different choice, or undefined to keep the policy's. */
  advise(ctx: RoutingContext, choice: RouteChoice): RouteChoice | undefined;
}
