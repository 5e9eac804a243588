# A small API class whose methods all go through one request helper.
import gatehouse
class API:
    provider = "crm"
    def __init__(self, version="v2"):
        self.prefix = f"/{version}"
    def _request(self, method, path, **kw):
        return gatehouse.call(self.provider, method, self.prefix + path, **kw)
    def get(self, path, **kw):
        return self._request("GET", path, **kw)
    def post(self, path, body):
        return self._request("POST", path, body=body)
api = API()
contacts = api.get("/contacts", query={"limit": "10"}).body
for c in contacts:
    api.post(f"/contacts/{c['id']}/tags", {"tag": "vip"})
