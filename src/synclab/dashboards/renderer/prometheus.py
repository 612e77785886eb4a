"""A small client of Prometheus' HTTP API (stdlib urllib): range and instant queries, label values.

Two errors, both naming the problem: :class:`PrometheusUnreachable` (nothing answers at the
URL, or the answer is not Prometheus') and :class:`QueryRejected` (Prometheus refused a query).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request


class PrometheusError(Exception):
    pass


class PrometheusUnreachable(PrometheusError):
    pass


class QueryRejected(PrometheusError):
    pass


class Prometheus:
    """``Prometheus("http://127.0.0.1:9090")``; every call is one GET of ``/api/v1/...``."""

    def __init__(self, url: str, timeout_s: float = 30.0):
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise PrometheusUnreachable(f"Prometheus URL must look like http://host:port, got {url!r}")
        self.url, self.timeout_s = url.rstrip("/"), timeout_s

    def _call(self, path: str, params: list[tuple[str, str]]) -> object:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            raw = e.read()  # Prometheus answers a bad query with 400/422 and a JSON error
            if e.code not in (400, 422, 503):
                raise PrometheusUnreachable(f"{self.url}{path} answered HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise PrometheusUnreachable(f"cannot reach Prometheus at {self.url}: {reason}") from None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise PrometheusUnreachable(f"{self.url}{path} did not answer with Prometheus' JSON "
                                        f"(is {self.url} a Prometheus server?)") from None
        if not isinstance(answer, dict) or "status" not in answer:
            raise PrometheusUnreachable(f"{self.url}{path} did not answer like Prometheus' HTTP API")
        if answer["status"] != "success":
            raise QueryRejected(f"{answer.get('errorType', 'error')}: {answer.get('error', answer)}")
        return answer["data"]

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[dict]:
        """Matrix result: ``[{"metric": {...}, "values": [[t, "v"], ...]}, ...]``."""
        data = self._call("/api/v1/query_range", [("query", expr), ("start", _num(start)), ("end", _num(end)),
                                                  ("step", _num(step_s))])
        return data["result"]

    def query(self, expr: str, at: float) -> list[dict]:
        """Instant vector: ``[{"metric": {...}, "value": [t, "v"]}, ...]`` (scalars come as one series)."""
        data = self._call("/api/v1/query", [("query", expr), ("time", _num(at))])
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def label_values(self, label: str, match: str | None, start: float, end: float) -> list[str]:
        params = [("start", _num(start)), ("end", _num(end))] + ([("match[]", match)] if match else [])
        return list(self._call(f"/api/v1/label/{urllib.parse.quote(label)}/values", params))


def _num(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")
