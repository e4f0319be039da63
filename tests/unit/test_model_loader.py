"""The botocore model loader the clients share (`core.storage.aws._shared_loader`) answers as
botocore's own does: the same services known, the same models, the same errors."""

from __future__ import annotations

import botocore.loaders
import botocore.session
import pytest
from botocore.exceptions import UnknownServiceError

from durable_streams_aws.core.storage.aws import _Loader, _PlainJsonFiles, _shared_loader

SERVICES_USED = ("dynamodb", "s3", "sqs", "secretsmanager", "ssm", "sts")


@pytest.fixture(scope="module")
def botocore_s() -> botocore.loaders.Loader:
    return botocore.loaders.create_loader()


@pytest.fixture(scope="module")
def ours() -> botocore.loaders.Loader:
    return _Loader(file_loader=_PlainJsonFiles())


@pytest.mark.parametrize("type_name", ["service-2", "endpoint-rule-set-1", "paginators-1"])
def test_every_known_service_is_known_and_no_other(
    botocore_s: botocore.loaders.Loader, ours: botocore.loaders.Loader, type_name: str
) -> None:
    known = botocore_s.list_available_services(type_name)
    names = ours.list_available_services(type_name)
    assert all(name in names for name in known)
    assert list(names) == known and len(names) == len(known)
    for stranger in ("nope", "", "../dynamodb", "dynamodb/2012-08-10", "DynamoDB", None):
        assert stranger not in names


@pytest.mark.parametrize("service", SERVICES_USED)
def test_the_models_are_botocore_s(
    botocore_s: botocore.loaders.Loader, ours: botocore.loaders.Loader, service: str
) -> None:
    for type_name in ("service-2", "endpoint-rule-set-1"):
        assert ours.load_service_model(service, type_name) == botocore_s.load_service_model(
            service, type_name
        )
    assert ours.load_data("endpoints") == botocore_s.load_data("endpoints")


def test_an_unknown_service_is_refused_with_botocore_s_error() -> None:
    session = botocore.session.get_session()
    session.register_component("data_loader", _shared_loader())
    with pytest.raises(UnknownServiceError, match=r"Unknown service: 'nope'\. Valid service names"):
        session.create_client("nope", region_name="us-east-1")
