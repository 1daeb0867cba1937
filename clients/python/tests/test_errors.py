"""One typed exception class per wire error code (docs/protocol.md, "Error codes")."""
import re
import pathlib

from airlock_client import AirlockError, ConnectionClosedError, ConnectionError, ErrorCode, error_class
from airlock_client.errors import error_from_wire

PROTOCOL_MD = pathlib.Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def test_every_code_of_the_protocol_table_has_its_own_class():
    documented = {int(c): name for c, name in re.findall(r"^\| (-32\d{3}) \| `(\w+)` \|", PROTOCOL_MD.read_text(), re.M)}
    assert len(documented) == 23
    assert {int(c) for c in ErrorCode} == set(documented)
    classes = {error_class(c) for c in documented}
    assert len(classes) == len(documented) and all(issubclass(c, AirlockError) for c in classes)
    for code, name in documented.items():
        assert ErrorCode(code).name == name.upper()
        e = error_from_wire({"code": code, "message": "m", "data": {"kind": "K"}})
        assert type(e) is error_class(code) and e.code == code and e.message == "m" and e.kind == "K"


def test_unknown_and_malformed_errors_stay_typed():
    e = error_from_wire({"code": -32099, "message": "newer"})
    assert type(e) is AirlockError and e.code == -32099 and e.kind is None
    assert isinstance(error_from_wire("nonsense"), AirlockError)
    assert issubclass(ConnectionClosedError, ConnectionError)
    assert issubclass(ConnectionError, AirlockError) and issubclass(ConnectionError, OSError)
