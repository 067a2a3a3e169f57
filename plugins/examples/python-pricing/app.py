"""A decoy transformer in Python: prices an order.

The request body is JSON: {"items": [{"sku": "A1", "price": 9.5, "qty": 2}, ...]}.
The answer is JSON with a running order number (kept in decoy's key-value store, so
it counts across calls and instances), the item count and the total with tax:

    {"orderNumber": 1, "items": 1, "total": 22.8, "currency": "EUR"}

Parameters (the mapping's transformerParameters): {"taxRate": 0.2, "currency": "EUR"}.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import kv, log, types


class Transformer(exports.Transformer):
    def transform(self, context: types.CallContext, request: types.Request,
                  response: types.Response) -> types.Response:
        if not isinstance(request, types.Request_Http) or not isinstance(response, types.Response_Http):
            raise Err(types.PluginError("python-pricing only prices HTTP requests"))
        params = json.loads(context.parameters or "{}")
        try:
            order = json.loads(request.value.body or b"{}")
            items = order["items"]
            subtotal = sum(float(i["price"]) * int(i.get("qty", 1)) for i in items)
        except (ValueError, KeyError, TypeError) as e:
            raise Err(types.PluginError(f"the order is not priceable: {e!r}"))
        number = kv.increment("order-number", 1)
        total = round(subtotal * (1 + float(params.get("taxRate", 0))), 2)
        log.log(log.Level.INFO, "priced an order",
                [("orderNumber", str(number)), ("total", str(total))])
        body = {"orderNumber": number, "items": len(items), "total": total,
                "currency": params.get("currency", "EUR")}
        out = response.value
        headers = [(k, v) for (k, v) in out.headers if k.lower() != "content-type"]
        headers.append(("content-type", "application/json"))
        return types.Response_Http(types.HttpResponse(
            status=out.status, headers=headers,
            body=json.dumps(body).encode(), delay_ms=out.delay_ms))
