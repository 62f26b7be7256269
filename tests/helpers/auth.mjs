// Credentials for the access-control tests: real key pairs (node:crypto), a JWKS served on
// 127.0.0.1 that counts its hits and whose keys a test can change (rotation), and JWTs signed
// with those keys (RS256, ES256) or with a shared secret (HS256).
import crypto from "node:crypto";
import http from "node:http";

const b64url = (buf) => Buffer.from(buf).toString("base64url");

/** An RSA (RS256) or EC P-256 (ES256) key pair named `kid`, with its public JWK. */
export function keyPair(kind, kid) {
  const { publicKey, privateKey } =
    kind === "EC"
      ? crypto.generateKeyPairSync("ec", { namedCurve: "P-256" })
      : crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: "jwk" }), kid, use: "sig", alg: kind === "EC" ? "ES256" : "RS256" };
  return { kid, kind, publicKey, privateKey, jwk };
}

/** A random HS256 secret. */
export const newSecret = () => crypto.randomBytes(32).toString("base64url");

/**
 * A compact JWS of `claims` with `header` (its `alg` decides how it is signed): `key` is a
 * key pair from `keyPair` for RS256/ES256, or a secret (string or Buffer) for HS256.
 */
export function sign(header, claims, key) {
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  let signature;
  switch (header.alg) {
    case "RS256":
      signature = crypto.sign("sha256", Buffer.from(input), key.privateKey);
      break;
    case "ES256":
      signature = crypto.sign("sha256", Buffer.from(input), { key: key.privateKey, dsaEncoding: "ieee-p1363" });
      break;
    case "HS256":
      signature = crypto.createHmac("sha256", key).update(input).digest();
      break;
    default:
      signature = Buffer.alloc(0);
  }
  return `${input}.${b64url(signature)}`;
}

/** A JWT for `key` (a key pair, signed with its own alg and kid; or an HS256 secret). */
export function jwt(key, claims) {
  const header = typeof key === "object" && key.kid ? { alg: key.jwk.alg, kid: key.kid, typ: "JWT" } : { alg: "HS256", typ: "JWT" };
  return sign(header, claims, key);
}

/** Seconds since the epoch, plus `offset`. */
export const now = (offset = 0) => Math.floor(Date.now() / 1000) + offset;

/**
 * Serves `{keys}` at http://127.0.0.1:<port>/jwks.json. `keys` may be replaced (rotation),
 * `down` makes it answer 503, and `hits` counts the requests.
 */
export async function startJwksServer(keys = []) {
  const state = { keys, hits: 0, down: false };
  const server = http.createServer((req, res) => {
    state.hits++;
    if (state.down) {
      res.writeHead(503).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ keys: state.keys.map((k) => k.jwk ?? k) }));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    state,
    url: `http://127.0.0.1:${server.address().port}/jwks.json`,
    close: () => new Promise((r) => server.close(r)),
  };
}
