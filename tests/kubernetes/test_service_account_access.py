"""Contract: each ServiceAccount of the release can do exactly what the table in docs/SECURITY.md ("What
each account may do, as the API server answers") says, allowed and refused, as judged by the real
authorizer (RBAC and the Node authorizer) of the session's API server.

Each question is a SelfSubjectAccessReview sent with a token of the account from the TokenRequest API,
so the token's authentication is part of what is checked. The table is read from the doc: the doc and
the cluster cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kubernetes
import pytest

from tests.kubernetes import cluster
from tests.kubernetes.cluster import OTHER_NAMESPACE, RELEASE_NAMESPACE
from tests.kubernetes.control_plane import ControlPlane

pytestmark = pytest.mark.kubernetes_api

TABLE_HEADING = "### What each account may do, as the API server answers"
COLUMNS = ["account", "verb", "resource", "namespace", "answer"]


@dataclass(frozen=True)
class Question:
    account: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str | None
    allowed: bool

    def __str__(self) -> str:
        answer = "allowed" if self.allowed else "refused"
        resource = f"{self.resource}.{self.group}/{self.subresource}".replace("./", "/").rstrip("/.")
        return f"{self.account} {self.verb} {resource} in {self.namespace or 'cluster'}: {answer}"


def _namespace(cell: str) -> str | None:
    return {"icepack": RELEASE_NAMESPACE, "elsewhere": OTHER_NAMESPACE, "(cluster)": None}[cell]


def documented_questions(doc: Path = cluster.SECURITY_DOC) -> list[Question]:
    """The rows of the table under TABLE_HEADING."""
    section = doc.read_text().split(TABLE_HEADING, 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header == COLUMNS, f"the table's columns are {COLUMNS}"
    questions = []
    for row in rows[2:]:
        account, verb, written, namespace, answer = (cell.strip() for cell in row.strip("|").split("|"))
        assert answer in ("allowed", "refused"), f"answer of {row!r}"
        match = re.fullmatch(r"([a-z]+)(?:\.([a-z0-9.]+))?(?:/([a-z]+))?", written)
        assert match, f"resource of {row!r}"
        resource, group, subresource = match.groups()
        questions.append(Question(account, verb, group or "", resource, subresource or "",
                                  _namespace(namespace), answer == "allowed"))
    return questions


QUESTIONS = documented_questions()


def test_the_table_covers_each_account_allowed_and_refused() -> None:
    accounts = {q.account for q in QUESTIONS}
    assert accounts == {"icepack-dagster", "icepack-user-code", "icepack-spark-driver"}
    for account in accounts:
        answers = {q.allowed for q in QUESTIONS if q.account == account}
        assert False in answers, f"{account}: the table names nothing it is refused"
    assert any(q.subresource == "exec" for q in QUESTIONS)
    assert any(q.resource == "secrets" for q in QUESTIONS)
    assert any(q.namespace == OTHER_NAMESPACE for q in QUESTIONS)


@pytest.fixture(scope="module")
def account_clients(
    release: cluster.Release, plane: ControlPlane, admin: kubernetes.client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, kubernetes.client.ApiClient]]:
    """A client per account, authenticated by a fresh token of it and nothing else."""
    directory = tmp_path_factory.mktemp("tokens")
    clients = {}
    for account in sorted({q.account for q in QUESTIONS}):
        token = cluster.service_account_token(admin, RELEASE_NAMESPACE, account)
        config = plane.token_kubeconfig(directory / f"{account}.kubeconfig", token)
        clients[account] = kubernetes.config.new_client_from_config(str(config))
    yield clients
    for client in clients.values():
        client.close()


@pytest.mark.parametrize("question", QUESTIONS, ids=str)
def test_the_api_server_answers_as_the_table_says(
    question: Question, account_clients: dict[str, kubernetes.client.ApiClient]
) -> None:
    api = kubernetes.client.AuthorizationV1Api(account_clients[question.account])
    review = api.create_self_subject_access_review(kubernetes.client.V1SelfSubjectAccessReview(
        spec=kubernetes.client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=kubernetes.client.V1ResourceAttributes(
                verb=question.verb, group=question.group, resource=question.resource,
                subresource=question.subresource or None, namespace=question.namespace))))
    assert review.status.allowed is question.allowed, review.status.reason


def test_the_tokens_authenticate_as_their_accounts(
    account_clients: dict[str, kubernetes.client.ApiClient]
) -> None:
    """Each client is who the table says: the API server's own view of the token's user."""
    for account, client in account_clients.items():
        review = kubernetes.client.AuthenticationV1Api(client).create_self_subject_review(
            kubernetes.client.V1SelfSubjectReview())
        assert review.status.user_info.username == f"system:serviceaccount:{RELEASE_NAMESPACE}:{account}"
