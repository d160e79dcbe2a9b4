/**
 * Options of our own a route may declare beside Elysia's (the router reads them from the route
 * table). A route module that declares one uses this plugin, which makes the option known to
 * Elysia and to the type checker.
 *
 * - `ownBody: true`: the router leaves the body unread and the route reads it itself, when and how
 *   it chooses. A trigger URL's credential is its path's secret, which only its route can check:
 *   it reads its body only after that (src/http/routes/hooks.ts).
 */
import { Elysia } from "elysia";

export const routeOptions = new Elysia({ name: "runcell-route-options" }).macro({ ownBody: {} });
