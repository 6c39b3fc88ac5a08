#!/bin/sh
# The package as a user gets it: npm pack (which builds it and adds the
# LICENSE), the tarball's contents checked, then installed into a fresh
# directory and imported there, by Node and by TypeScript (strict, with
# Node's own module resolution, so "exports" and "types" must be right).
# Run from clients/ts after npm ci: npm run pack:check (make ts-pack).
set -eu
here=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

version=$(tr -d '[:space:]' < ../../VERSION)
tarball=$(npm pack --silent --pack-destination "$tmp" | tail -n 1)
echo "packed $tarball"
[ "$tarball" = "searchd-client-$version.tgz" ] || { echo "FAIL: packed $tarball, want searchd-client-$version.tgz (the VERSION file's version)"; exit 1; }

tar -tzf "$tmp/$tarball" | sort > "$tmp/contents"
for f in package/package.json package/LICENSE package/README.md package/dist/src/index.js \
	package/dist/src/index.d.ts package/dist/src/schema.d.ts; do
	grep -qx "$f" "$tmp/contents" || { echo "FAIL: the tarball lacks $f:"; cat "$tmp/contents"; exit 1; }
done
if grep -E '^package/(dist/test|src|test|node_modules|browser|scripts)/' "$tmp/contents"; then
	echo "FAIL: the tarball carries the files above, which are not the package's"
	exit 1
fi
cmp -s "$here/../../LICENSE" "$here/LICENSE" || { echo "FAIL: the packed LICENSE is not the repository's"; exit 1; }

mkdir "$tmp/app"
cd "$tmp/app"
printf '{"name": "app", "version": "1.0.0", "private": true, "type": "module"}\n' > package.json
npm install --no-audit --no-fund --silent "$tmp/$tarball"

cat > main.mjs <<'JS'
import { SearchdClient, newIdempotencyKey, SearchdError } from "@searchd/client";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
const client = new SearchdClient({ baseUrl: "http://127.0.0.1:9", token: "t" });
assert.equal(typeof client.startSavedSearch, "function");
assert.match(newIdempotencyKey(), /^[0-9a-f-]{36}$/);
assert.equal(typeof SearchdError, "function");
const pkg = createRequire(import.meta.url)("@searchd/client/package.json");
assert.equal(pkg.license, "Apache-2.0");
await assert.rejects(import("@searchd/client/dist/src/index.js"), { code: "ERR_PACKAGE_PATH_NOT_EXPORTED" });
console.log(`imported @searchd/client ${pkg.version} (${pkg.license})`);
JS
node main.mjs

cat > main.mts <<'TS'
import { SearchdClient, newIdempotencyKey, type Run, type Started } from "@searchd/client";
const client = new SearchdClient({ baseUrl: "http://127.0.0.1:9", token: "t" });
export async function start(id: string): Promise<Run> {
  const s: Started = await client.startSavedSearch(id, { max_results: 10 }, { idempotencyKey: newIdempotencyKey() });
  const key: string = s.idempotencyKey;
  void key;
  return s.run;
}
// @ts-expect-error: max_results is a number, so the types came through
client.startSavedSearch("id", { max_results: "ten" });
TS
"$here/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext \
	--target es2022 --lib es2022,dom --types node --typeRoots "$here/node_modules/@types" main.mts
echo "type-checked an import of @searchd/client with moduleResolution nodenext"
echo "pack-check: ok"
