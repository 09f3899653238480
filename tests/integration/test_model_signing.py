"""Signed models (docs/signing.md): each model folder is signed with the
OpenSSF `model-signing` package (key-based, `model_signing sign key`), then
tampered with in one way, and one server per --model-signature-policy loads
them all. Under `require` the signed, untouched models are READY and serve
what onnxruntime computes; every tampered one is UNAVAILABLE with a reason
naming the file or the check. `warn` loads what it can and logs the failure;
`off` checks nothing."""
from __future__ import annotations

import base64
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

pytest.importorskip("model_signing")
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

from harness import (Server, assert_matches, infer_inputs, make_test_models, model_file,  # noqa: E402
                     ortserve_binary, start_server)


BASE = "add_sub_fp32"
FAILS_TO_PARSE = {"changed"}  # its model file is no longer an ONNX model: no policy loads it

SIGNED = ["signed", "version_signed", "cert_signed", "library_inside"]  # untouched, by a trusted key or CA
# model -> what its reason must contain under `require`.
EXPECTED = {
    "changed": "file '1/model.onnx' does not match the signature",
    "config_changed": "file 'config.pbtxt' does not match the signature",
    "added": "file '1/extra.bin' is not covered by the signature",
    "removed": "file '1/weights.bin' is signed but missing",
    "wrong_key": "signed by an unknown key",
    "corrupted": "bad signature",
    "unsigned": "no model.sig in",
    "not_json": "model.sig: signature bundle is not valid JSON",
    "cert_other_ca": "certificate chain does not verify against --model-signing-certificate-chain",
    "library_outside": "libortserve_test_ops.so' is read by the load but not covered by",
}
OP_LIBRARY = ortserve_binary().parent / "libortserve_test_ops.so"  # CMake target ortserve_test_ops


def write_key(path: pathlib.Path) -> pathlib.Path:
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    public = path.with_suffix(".pub")
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return public


def write_certificate(path: pathlib.Path, subject: str, issuer: tuple | None) -> tuple:
    """A P-256 key and certificate for `subject`, signed by `issuer` (key,
    certificate), or a self-signed CA without one; the key written next to it."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(issuer[1].subject if issuer else
                            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=1))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=issuer is not None, key_cert_sign=issuer is None,
                                            crl_sign=issuer is None, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False, key_agreement=False,
                                            encipher_only=False, decipher_only=False), critical=True))
    cert = builder.sign(issuer[0] if issuer else key, hashes.SHA256())
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    path.with_suffix(".key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))
    return key, cert


def sign_with_certificate(folder: pathlib.Path, leaf: pathlib.Path, ca: pathlib.Path) -> None:
    subprocess.run([sys.executable, "-m", "model_signing", "sign", "certificate",
                    "--private_key", str(leaf.with_suffix(".key")), "--signing_certificate", str(leaf),
                    "--certificate_chain", str(ca), "--signature", str(folder / "model.sig"), str(folder)],
                   check=True, capture_output=True)


def sign(folder: pathlib.Path, private_key: pathlib.Path) -> None:
    subprocess.run([sys.executable, "-m", "model_signing", "sign", "key", "--private_key", str(private_key),
                    "--signature", str(folder / "model.sig"), str(folder)], check=True, capture_output=True)


def add_model(repo: pathlib.Path, name: str, op_library: pathlib.Path | None = None) -> pathlib.Path:
    shutil.copytree(repo / BASE, repo / name)
    config = (repo / BASE / "config.pbtxt").read_text().replace(f'name: "{BASE}"', f'name: "{name}"')
    if op_library is not None:
        config += f'model_operations {{ op_library_filename: "{op_library}" }}\n'
    (repo / name / "config.pbtxt").write_text(config)
    return repo / name


def corrupt_signature(sig: pathlib.Path) -> None:
    bundle = json.loads(sig.read_text())
    raw = bytearray(base64.b64decode(bundle["dsseEnvelope"]["signatures"][0]["sig"]))
    raw[-1] ^= 1
    bundle["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()
    sig.write_text(json.dumps(bundle))


@pytest.fixture(scope="module")
def signed_repo(tmp_path_factory):
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("signing_models"), [BASE])
    keys = tmp_path_factory.mktemp("signing_keys")
    trusted, other = keys / "trusted.pem", keys / "other.pem"
    public = write_key(trusted)
    write_key(other)
    sign(add_model(repo, "signed"), trusted)
    sign(add_model(repo, "version_signed") / "1", trusted)  # a version-level model.sig
    ca, other_ca = keys / "ca.pem", keys / "other_ca.pem"
    ca_pair = write_certificate(ca, "model signing CA", None)
    other_ca_pair = write_certificate(other_ca, "another CA", None)
    write_certificate(keys / "leaf.pem", "model signer", ca_pair)
    write_certificate(keys / "other_leaf.pem", "other signer", other_ca_pair)
    sign_with_certificate(add_model(repo, "cert_signed"), keys / "leaf.pem", ca)
    # An op library the config names is covered only inside the signed folder.
    if not OP_LIBRARY.is_file():
        pytest.skip(f"{OP_LIBRARY} not built")
    inside = repo / "library_inside" / OP_LIBRARY.name
    add_model(repo, "library_inside", op_library=inside)
    shutil.copy(OP_LIBRARY, inside)
    sign(repo / "library_inside", trusted)
    sign(add_model(repo, "library_outside", op_library=OP_LIBRARY), trusted)
    for name in EXPECTED:
        if not (repo / name).exists():
            add_model(repo, name)
    shutil.rmtree(repo / BASE)
    # Each case is signed as it stands, then tampered with.
    for name in ("changed", "config_changed", "added", "corrupted", "not_json"):
        sign(repo / name, trusted)
    (repo / "removed" / "1" / "weights.bin").write_bytes(b"\0" * 64)
    sign(repo / "removed", trusted)
    sign(repo / "wrong_key", other)
    sign_with_certificate(repo / "cert_other_ca", keys / "other_leaf.pem", other_ca)
    with open(repo / "changed" / "1" / "model.onnx", "ab") as f:
        f.write(b"\x01")
    with open(repo / "config_changed" / "config.pbtxt", "a") as f:
        f.write("# edited after signing\n")
    (repo / "added" / "1" / "extra.bin").write_bytes(b"unsigned")
    (repo / "removed" / "1" / "weights.bin").unlink()
    corrupt_signature(repo / "corrupted" / "model.sig")
    (repo / "not_json" / "model.sig").write_text("{not json")
    return repo, public, ca


def states(srv) -> dict:
    return {m["name"]: m for m in srv.repository_index()}


def assert_serves_like_onnxruntime(srv, repo, name, reference) -> None:
    a = np.arange(16, dtype=np.float32).reshape(1, 16)
    b = np.full((1, 16), 0.5, np.float32)
    with httpclient.InferenceServerClient(srv.url) as client:
        served = client.infer(name, infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}))
    expected = reference.run(model_file(repo, name), {"INPUT0": a, "INPUT1": b})
    for output in ("OUTPUT0", "OUTPUT1"):
        assert_matches(served.as_numpy(output), expected[output], exact=True)


def policy_server(repo, public, ca, log_dir, policy):
    return start_server(repo, log_dir, f"signing_{policy}",
                        extra_args=("--model-signature-policy", policy, "--model-signing-public-key", str(public),
                                    "--model-signing-certificate-chain", str(ca)))


def test_require_loads_only_verified_models(signed_repo, log_dir, reference):
    repo, public, ca = signed_repo
    srv = policy_server(repo, public, ca, log_dir, "require")
    try:
        srv.wait_models_ready(SIGNED)
        index = states(srv)
        for name, words in EXPECTED.items():
            assert index[name]["state"] == "UNAVAILABLE", index[name]
            assert "model signature check failed" in index[name]["reason"], index[name]
            assert words in index[name]["reason"], index[name]
        for name in SIGNED:
            assert_serves_like_onnxruntime(srv, repo, name, reference)
    finally:
        srv.stop()


def test_warn_loads_and_logs(signed_repo, log_dir):
    repo, public, ca = signed_repo
    srv = policy_server(repo, public, ca, log_dir, "warn")
    try:
        loadable = SIGNED + [n for n in EXPECTED if n not in FAILS_TO_PARSE]
        srv.wait_models_ready(loadable)
        log = srv.log_text()
        for name in EXPECTED:
            assert f"model '{name}' version 1: model signature check failed: " in log, name
        assert "model 'signed' version 1: model signature" not in log
    finally:
        srv.stop()


def test_off_checks_nothing(signed_repo, log_dir):
    srv = start_server(signed_repo[0], log_dir, "signing_off")
    try:
        srv.wait_models_ready(SIGNED + [n for n in EXPECTED if n not in FAILS_TO_PARSE])
        assert "model signature" not in srv.log_text()
    finally:
        srv.stop()


def test_require_needs_a_key(signed_repo, log_dir):
    repo, _, _ = signed_repo
    srv = Server(repo, log_dir / "signing_no_key.log", extra_args=("--model-signature-policy", "require")).start()
    assert srv.proc.wait(timeout=60) != 0
    assert "--model-signature-policy=require needs at least one --model-signing-public-key" in srv.log_text()


def test_an_on_demand_load_checks_the_signature_after_a_metadata_request(tmp_path, launch):
    """--model-load-on-demand keeps a listed model's preparation for its load while the
    folder's stamp (sizes, mtimes) is unchanged; with signing on, the load checks the
    signature itself all the same: a model file changed after the metadata request, its
    size and mtime kept, is refused."""
    repo = make_test_models.build_test_repository(tmp_path / "repo", [BASE])
    public = write_key(tmp_path / "key.pem")
    sign(repo / BASE, tmp_path / "key.pem")
    srv = launch(repo, extra_args=("--model-load-on-demand=true", "--model-signature-policy", "require",
                                   "--model-signing-public-key", str(public)))
    with httpclient.InferenceServerClient(srv.url) as client:
        assert client.get_model_metadata(BASE)["versions"] == ["1"]
        model = repo / BASE / "1" / "model.onnx"
        before = model.stat()
        data = model.read_bytes()
        assert data.count(b"make_demo_models") == 1
        model.write_bytes(data.replace(b"make_demo_models", b"make_demo_modelX"))  # still a valid model
        os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
        a = np.zeros((1, 16), np.float32)
        with pytest.raises(InferenceServerException) as e:
            client.infer(BASE, infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", a)}))
    assert "file '1/model.onnx' does not match the signature" in str(e.value), str(e.value)
