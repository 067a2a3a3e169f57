"""A test guest in Python for decoy's handling of guest output and failures.

The `mode` parameter says what it does:
- "print": increments "n" in the kv store, prints a line, answers "count=<n>";
- "raise": raises an uncaught ZeroDivisionError (a trap, with a traceback on stderr);
- "error": returns a plugin-error value;
- anything else: answers "ok".
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import kv, types


class Transformer(exports.Transformer):
    def transform(self, context: types.CallContext, request: types.Request,
                  response: types.Response) -> types.Response:
        mode = json.loads(context.parameters or "{}").get("mode", "")
        out = response.value
        if mode == "print":
            n = kv.increment("n", 1)
            print(f"python guest: call number {n}")
            body = f"count={n}".encode()
        elif mode == "raise":
            body = str(1 / 0).encode()
        elif mode == "error":
            raise Err(types.PluginError("py-stdio refuses on purpose"))
        else:
            body = b"ok"
        return types.Response_Http(types.HttpResponse(
            status=out.status, headers=out.headers, body=body, delay_ms=out.delay_ms))
