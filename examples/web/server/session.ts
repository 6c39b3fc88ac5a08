// The example's stand-in for your product's backend. The backend knows who
// the signed-in user is and which organization they belong to, and mints
// them a short-lived searchd token, signed with SEARCHD_JWT_SECRET (HS256,
// as searchd verifies). The page fetches it from /session; the secret
// never reaches the browser. This file runs inside the Vite server (dev
// and preview), never in the page.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Plugin } from "vite";

/** searchd dev's demo organization, which dev's demo data belongs to. */
const demoOrganization = "d0d0d0d0-0000-4000-8000-000000000001";

/** What /session answers: where searchd is, and a token for it. */
export interface Session {
  searchd: string;
  token: string;
  /** When the token expires, in milliseconds since the epoch. */
  expiresAt: number;
  organization: string;
  user: string;
}

/**
 * The session of the one user this example signs in, from the environment,
 * read on every request (so a secret that dev makes after this server
 * started is found): SEARCHD_URL (default http://127.0.0.1:8080),
 * SEARCHD_JWT_SECRET or else the file SEARCHD_JWT_SECRET_FILE (default
 * ../../.searchd-dev/jwt-secret, the secret `bin/searchd dev` keeps at the
 * repository's root), SEARCHD_ORG (default dev's demo organization),
 * SEARCHD_USER (the token's sub, recorded as the Runs' created_by).
 */
export function newSession(env: NodeJS.ProcessEnv = process.env, now = Date.now()): Session {
  const secret = env.SEARCHD_JWT_SECRET ?? readFileSync(env.SEARCHD_JWT_SECRET_FILE ?? "../../.searchd-dev/jwt-secret", "utf8").trim();
  const organization = env.SEARCHD_ORG ?? demoOrganization;
  const user = env.SEARCHD_USER ?? "web-example-user";
  const ttlSeconds = 10 * 60;
  const iat = Math.floor(now / 1000);
  const token = signHS256(secret, { org_id: organization, sub: user, iat, exp: iat + ttlSeconds });
  return { searchd: env.SEARCHD_URL ?? "http://127.0.0.1:8080", token, expiresAt: (iat + ttlSeconds) * 1000, organization, user };
}

/** A compact JWT of claims, signed with HMAC-SHA256. */
export function signHS256(secret: string, claims: Record<string, string | number>): string {
  const part = (v: object) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const signed = `${part({ alg: "HS256", typ: "JWT" })}.${part(claims)}`;
  return `${signed}.${createHmac("sha256", secret).update(signed).digest("base64url")}`;
}

function handle(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  if (req.url !== "/session" || req.method !== "GET") return next();
  res.setHeader("Cache-Control", "no-store");
  res.setHeader("Content-Type", "application/json");
  try {
    res.end(JSON.stringify(newSession()));
  } catch (err) {
    res.statusCode = 500;
    res.end(JSON.stringify({ error: `no searchd token: ${String(err)}; run bin/searchd dev at the repository's root, or set SEARCHD_JWT_SECRET` }));
  }
}

/** The /session endpoint, on Vite's dev and preview servers. */
export function sessionEndpoint(): Plugin {
  return {
    name: "searchd-session",
    configureServer: (server) => void server.middlewares.use(handle),
    configurePreviewServer: (server) => void server.middlewares.use(handle),
  };
}
