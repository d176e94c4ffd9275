# kubesched: `docker build -t kubesched:0.1.0 .` (the tag manifests/deployment.yaml names).
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
# A virtualenv, copied whole into the runtime image: no pip, build files or caches there.
RUN python -m venv /opt/kubesched \
 && /opt/kubesched/bin/pip install --no-cache-dir --disable-pip-version-check .

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="kubesched" \
      org.opencontainers.image.description="A Kubernetes pod scheduler with kube-scheduler's algorithm and live policies"
COPY --from=build /opt/kubesched /opt/kubesched
# The root filesystem is read-only in the Deployment: bytecode was compiled at install time.
ENV PATH=/opt/kubesched/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A numeric user, so that the kubelet can check runAsNonRoot without a passwd entry.
USER 65532:65532
EXPOSE 10251
ENTRYPOINT ["kubesched", "run"]
