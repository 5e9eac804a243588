// Loaded with `node --import ./sdk.mjs`: bare imports (@modelcontextprotocol/sdk,
// ajv, zod) that do not resolve beside the importing script resolve in the
// pinned install .ci/install-deps made ($MCP_TS_SDK_DIR, its node_modules), so
// a script works from any folder, the sandbox's workspace included.
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';

const dir = process.env.MCP_TS_SDK_DIR;
if (!dir) throw new Error('MCP_TS_SDK_DIR is not set');
const hook = `
let base;
export function initialize(data) { base = data.base; }
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (err) {
    if (/^[.\\/]|^[a-z]+:/.test(specifier)) throw err;
    return next(specifier, { ...context, parentURL: base });
  }
}`;
register('data:text/javascript,' + encodeURIComponent(hook), { data: { base: pathToFileURL(dir + '/resolve-from.mjs').href } });
