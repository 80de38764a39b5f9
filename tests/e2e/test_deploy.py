"""The container, the Kubernetes bundle and the compose stack, checked without a Docker engine."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from pgq_exporter.bundle import RULES_FILE
from pgq_exporter.bundle.settings import BundleConfig
from pgq_exporter.config import DEFAULT_LISTEN_ADDRESS, load_config, split_address
from pgq_exporter.http.ports import free_port
from tests.conftest import Database
from tests.support import require_tool, wait_for

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).parents[2]
K8S = ROOT / "deploy" / "kubernetes"
K8S_VERSION = "1.31.0"


def dockerfile() -> dict[str, list[str]]:
    """Instruction -> its arguments, for the final stage, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages = text.split("\nFROM ")
    final: dict[str, list[str]] = {}
    for line in stages[-1].splitlines()[1:]:
        if line.strip() and not line.lstrip().startswith("#"):
            instruction, _, rest = line.strip().partition(" ")
            final.setdefault(instruction.upper(), []).append(rest.strip())
    return final


def test_hadolint_accepts_the_dockerfile() -> None:
    hadolint = require_tool("hadolint")
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True,
                            check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_agrees_with_the_code() -> None:
    final = dockerfile()
    port = split_address(DEFAULT_LISTEN_ADDRESS)[1]
    assert final["EXPOSE"] == [str(port)]
    [user] = final["USER"]
    assert user.isdigit() and int(user) != 0
    [healthcheck] = final["HEALTHCHECK"]
    assert (
        f'pgq-exporter", "healthcheck", "--web.listen-address", "127.0.0.1:{port}"' in healthcheck
    )
    assert json.loads(final["ENTRYPOINT"][0]) == ["pgq-exporter", "serve"]
    assert json.loads(final["CMD"][0]) == ["--config", "/etc/pgq-exporter/config.yaml"]
    config = load_config(ROOT / "deploy/docker/config.yaml", {"DATA_SOURCE_NAME": "host=db"})
    assert config.web.listen_address == DEFAULT_LISTEN_ADDRESS
    ignored = (ROOT / ".dockerignore").read_text()
    for copied in ("pyproject.toml", "README.md", "pgq_exporter/", "deploy/docker/"):
        assert f"!{copied}" in ignored


def test_the_image_install_and_entrypoint_work_against_postgresql(db: Database) -> None:
    """The Dockerfile's steps, outside Docker: wheels, a fresh venv, then its command."""
    final = dockerfile()
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        wheels, env_dir = root / "wheels", root / "venv"
        # The build stage's context: only what the Dockerfile copies (no stale build/ dir).
        source = root / "src"
        source.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(ROOT / name, source / name)
        shutil.copytree(ROOT / "pgq_exporter", source / "pgq_exporter",
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels),
                        str(source)], check=True, capture_output=True, env=clean_env)  # fmt: skip
        venv.create(env_dir, with_pip=True)
        [project_wheel] = glob.glob(str(wheels / "pgq_exporter-*.whl"))
        subprocess.run([str(env_dir / "bin/pip"), "install", "--quiet", "--no-cache-dir",
                        "--no-index", f"--find-links={wheels}", project_wheel],
                       check=True, capture_output=True, env=clean_env)  # fmt: skip
        command = json.loads(final["ENTRYPOINT"][0]) + json.loads(final["CMD"][0])
        command[0] = str(env_dir / "bin" / command[0])
        copies = {dest: src for src, dest in (c.split() for c in final["COPY"]
                                              if not c.startswith("--from"))}  # fmt: skip
        command[command.index("--config") + 1] = str(
            ROOT / copies[command[command.index("--config") + 1]]
        )
        port = free_port()
        exporter = subprocess.Popen(
            [*command, "--web.listen-address", f"127.0.0.1:{port}"],
            env={"DATA_SOURCE_NAME": db.dsn, "PATH": "/usr/bin:/bin"},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            healthcheck = json.loads(final["HEALTHCHECK"][0].split("CMD", 1)[1])
            healthcheck[0] = str(env_dir / "bin" / healthcheck[0])
            healthcheck[-1] = healthcheck[-1].replace("9188", str(port))

            def healthy() -> bool:
                assert exporter.poll() is None, exporter.communicate()[0]
                return subprocess.run(healthcheck, capture_output=True, check=False).returncode == 0

            wait_for(healthy, "the image's HEALTHCHECK to pass", 30, interval=0.1)
            metrics = _wait_for_metric(port, "pgq_up")
            assert 'pgq_up{database="main"} 1.0' in metrics
        finally:
            exporter.terminate()
            output, _ = exporter.communicate(timeout=15)
        assert exporter.returncode == 0, output
        assert '"msg": "serving"' in output  # the image's config logs JSON


def _wait_for_metric(port: int, name: str) -> str:
    import urllib.request  # noqa: PLC0415

    def served() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def reads_one(text: str) -> bool:
        return f"{name}{{" in text and " 1.0" in text.split(f"{name}{{", 1)[1].split("\n", 1)[0]

    return wait_for(served, f"{name} to read 1", 20, until=reads_one, interval=0.2)


def _documents() -> list[tuple[Path, dict[str, Any]]]:
    docs = []
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path, doc))
    return docs


def test_every_kubernetes_manifest_validates() -> None:
    kinds = set()
    for path, doc in _documents():
        kinds.add(doc["kind"])
        if doc["kind"] == "Kustomization":
            listed = {r for r in doc["resources"] if r.endswith(".yaml")}
            present = {p.name for p in path.parent.glob("*.yaml")} - {"kustomization.yaml"}
            assert listed == present, path
            continue
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # custom resources: checked below
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert {"Deployment", "Service", "ServiceMonitor", "PrometheusRule", "ConfigMap", "Secret",
            "CronJob", "PodDisruptionBudget", "HorizontalPodAutoscaler", "StatefulSet"} <= kinds  # fmt: skip


def test_the_exporter_deployment_probes_and_hardening() -> None:
    docs = {(p.name, d["kind"]): d for p, d in _documents()}
    pod = docs[("exporter-deployment.yaml", "Deployment")]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["resources"]["requests"] and container["resources"]["limits"]
    port = split_address(DEFAULT_LISTEN_ADDRESS)[1]
    assert container["ports"] == [{"name": "metrics", "containerPort": port}]
    service = docs[("exporter-service.yaml", "Service")]
    monitor = docs[("servicemonitor.yaml", "ServiceMonitor")]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    config_text = docs[("exporter-config.yaml", "ConfigMap")]["data"]["config.yaml"]
    with tempfile.TemporaryDirectory() as tmp:
        secret, config = Path(tmp) / "dsn", Path(tmp) / "config.yaml"
        secret.write_text("postgresql://pgq_exporter:pw@postgres/app\n")
        config.write_text(config_text.replace("/var/run/secrets/pgq/dsn", str(secret)))
        assert load_config(config).databases[0].dsn == "postgresql://pgq_exporter:pw@postgres/app"
    worker = docs[("worker-deployment.yaml", "Deployment")]["spec"]["template"]["spec"]
    grace = worker["terminationGracePeriodSeconds"]
    command = worker["containers"][0]["command"]
    assert int(command[command.index("--grace") + 1].rstrip("s")) < grace


def test_the_fleet_variant_shards_over_its_replicas_and_promtool_accepts_it(
    tmp_path: Path,
) -> None:
    docs = {(p.name, d["kind"]): d for p, d in _documents()}
    replicas = docs[("fleet-statefulset.yaml", "StatefulSet")]["spec"]
    service = docs[("fleet-service.yaml", "Service")]
    assert (
        service["spec"]["clusterIP"] == "None" and replicas["serviceName"] == "pgq-exporter-fleet"
    )
    secret = docs[("prometheus-scrape-config.yaml", "Secret")]["stringData"]["scrape.yaml"]
    jobs = yaml.safe_load(secret)
    assert len(jobs) == replicas["replicas"]
    for n, job in enumerate(jobs):
        [sd] = job["http_sd_configs"]
        assert sd["url"].startswith(f"http://{service['metadata']['name']}.")
        shard, keep, _, address = job["relabel_configs"][1:]
        assert shard["modulus"] == replicas["replicas"] and keep["regex"] == str(n)
        assert address["replacement"].startswith(f"pgq-exporter-fleet-{n}.pgq-exporter-fleet.")
    prometheus = tmp_path / "prometheus.yml"
    prometheus.write_text(yaml.safe_dump({"scrape_configs": jobs}))
    promtool = require_tool("promtool")
    subprocess.run([promtool, "check", "config", str(prometheus)], check=True, capture_output=True)
    config_text = docs[("fleet-config.yaml", "ConfigMap")]["data"]["config.yaml"]
    dsn, config = tmp_path / "dsn", tmp_path / "config.yaml"
    dsn.write_text("postgresql://pgq_exporter:pw@postgres/postgres\n")
    config.write_text(config_text.replace("/var/run/secrets/pgq/dsn", str(dsn)))
    [source] = load_config(config).discover
    assert source.name == "tenants" and source.template.dsn.endswith("@postgres/postgres")


def test_prometheusrule_is_the_generated_rules_and_promtool_accepts_it(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    rule = yaml.safe_load((K8S / "base/prometheusrule.yaml").read_text())
    assert rule["spec"] == yaml.safe_load((ROOT / RULES_FILE).read_text())
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    result = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yaml")],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout
    dashboards = yaml.safe_load((K8S / "base/grafana-dashboards.yaml").read_text())
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    for name, text in dashboards["data"].items():
        assert text == (ROOT / "dashboards" / name).read_text()


def test_prometheus_adapter_rules_serve_the_hpa_metric() -> None:
    docs = {(p.name, d["kind"]): d for p, d in _documents()}
    adapter = yaml.safe_load(
        docs[("prometheus-adapter-rules.yaml", "ConfigMap")]["data"]["config.yaml"]
    )
    [rule] = adapter["externalRules"]
    hpa = docs[("worker-hpa.yaml", "HorizontalPodAutoscaler")]
    metric_name = hpa["spec"]["metrics"][0]["external"]["metric"]["name"]
    assert rule["name"]["as"] == metric_name == "pgq_queue_ready_jobs"
    assert rule["seriesQuery"].startswith(metric_name)


def test_compose_mounts_exist_and_provisioning_is_valid() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mounts = {}
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            assert (ROOT / source).exists(), source
            mounts[target] = ROOT / source
        if "build" in service:
            assert (ROOT / service["build"] / "Dockerfile").is_file()
    prometheus = yaml.safe_load((ROOT / "deploy/compose/prometheus.yml").read_text())
    for rule_file in prometheus["rule_files"]:
        folder, _, name = rule_file.rpartition("/")
        assert (mounts[folder] / name).is_file(), rule_file
    provisioning = mounts["/etc/grafana/provisioning"]
    datasources = yaml.safe_load((provisioning / "datasources/prometheus.yaml").read_text())
    assert datasources["apiVersion"] == 1
    assert datasources["datasources"][0]["type"] == "prometheus"
    providers = yaml.safe_load((provisioning / "dashboards/pgq.yaml").read_text())
    path = Path(providers["providers"][0]["options"]["path"])
    assert list(mounts[str(path)].glob("*.json")), "the provider's folder has the dashboards"


def _rendered(directory: Path) -> list[dict[str, Any]]:
    kubectl = require_tool("kubectl")
    done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True,
                          text=True, check=True, timeout=60)  # fmt: skip
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _job_label(docs: list[dict[str, Any]]) -> str:
    """The job label prometheus-operator gives the exporter's targets: the value of the
    Service label its ServiceMonitor names as jobLabel, else the Service's name."""
    [monitor] = [d for d in docs if d["kind"] == "ServiceMonitor"]
    wanted = monitor["spec"]["selector"]["matchLabels"].items()
    [service] = [d for d in docs if d["kind"] == "Service"
                 and wanted <= d["metadata"].get("labels", {}).items()]  # fmt: skip
    job_label = monitor["spec"].get("jobLabel")
    return str(
        service["metadata"]["labels"][job_label] if job_label else service["metadata"]["name"]
    )


@pytest.mark.parametrize("overlay", ["", "kube-prometheus-stack", "reference-queue"])
def test_a_healthy_exporter_on_the_shipped_kubernetes_setup_raises_no_alert(
    overlay: str, tmp_path: Path
) -> None:
    docs = _rendered(K8S / overlay)
    job = _job_label(docs)
    assert job == BundleConfig().job
    [rule] = [d for d in docs if d["kind"] == "PrometheusRule"]
    if overlay == "kube-prometheus-stack":  # what that chart's Prometheus selects by
        monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
        assert monitor["metadata"]["labels"]["release"] == rule["metadata"]["labels"]["release"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    target = f'job="{job}", instance="10.0.0.7:9188"'
    alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {   # scraped and up, as prometheus-operator labels it: nothing fires
                "interval": "1m",
                "input_series": [{"series": f"up{{{target}}}", "values": "1x30"}],
                "alert_rule_test": [{"eval_time": "30m", "alertname": a, "exp_alerts": []}
                                    for a in alerts],
            },
            {   # down: it pages, so the quiet case above is not a selector that matches nothing
                "interval": "1m",
                "input_series": [{"series": f"up{{{target}}}", "values": "0x30"}],
                "alert_rule_test": [{"eval_time": "30m", "alertname": "PgqExporterDown",
                                     "exp_alerts": [{"exp_labels": {
                                         "severity": "critical", "job": job,
                                         "instance": "10.0.0.7:9188"},
                                         "exp_annotations": _annotations(
                                             rule, "PgqExporterDown",
                                             {"instance": "10.0.0.7:9188", "job": job})}]}],
            },
        ],
    }  # fmt: skip
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    promtool = require_tool("promtool")
    result = subprocess.run([promtool, "test", "rules", str(tmp_path / "tests.yaml")],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def _annotations(rule: dict[str, Any], alert: str, labels: dict[str, str]) -> dict[str, str]:
    """An alert's annotations as it fires with ``labels`` (their templates filled)."""
    [found] = [r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == alert]
    annotations = dict(found["annotations"])
    for key, template in annotations.items():
        filled = template
        for label, value in labels.items():
            filled = filled.replace(f"{{{{ $labels.{label} }}}}", value)
        annotations[key] = filled
    return annotations
