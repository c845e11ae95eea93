"""Posts a JSON message to a chat webhook (Slack's incoming webhooks and the many services that accept
the same body). The URL carries a token, so it arrives as a `SecretStr`, is revealed only for the
request and is never part of an error message."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping

from pydantic import SecretStr

from icepack_dagster.exceptions import WebhookDeliveryError

DEFAULT_TIMEOUT_SECONDS = 10.0


def post_json(
    url: SecretStr, payload: Mapping[str, object], timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> None:
    """POST `payload` as JSON; raises WebhookDeliveryError (without the URL) unless the answer is 2xx."""
    secret = url.get_secret_value()
    if not secret.lower().startswith(("http://", "https://")):
        raise WebhookDeliveryError("the alert webhook URL is not an http(s) URL (platform.alert_webhook_url)")
    try:
        request = urllib.request.Request(
            secret,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (http(s) only)
            response.read()
    except urllib.error.HTTPError as error:
        raise WebhookDeliveryError(f"the alert webhook answered HTTP {error.code} ({error.reason})") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        text = str(reason).replace(secret, "<webhook URL>")
        raise WebhookDeliveryError(f"the alert webhook could not be reached: {text}") from None
