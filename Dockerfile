# kubesched: `make image` builds kubesched:VERSION (the tag manifests/deployment.yaml names), passing
# VERSION (pyproject.toml's) and REVISION (the git commit) as build arguments.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements/constraints.txt ./requirements/
COPY operator ./operator
# A virtualenv, copied whole into the runtime image. Every dependency at the lock's version, so that
# a rebuild of the same commit installs the same code: pip and the build backend too (the lock's, not
# the base image's or the newest), with the package built without an isolated environment, which
# would fetch its own unpinned setuptools.
RUN python -m venv /opt/kubesched \
 && /opt/kubesched/bin/pip install --no-cache-dir --disable-pip-version-check \
      -c requirements/constraints.txt pip setuptools wheel \
 && /opt/kubesched/bin/pip install --no-cache-dir --disable-pip-version-check --no-build-isolation \
      -c requirements/constraints.txt .

FROM python:3.11-slim-bookworm
COPY --from=build /opt/kubesched /opt/kubesched
# A plain `docker build .` leaves them unknown rather than guessing.
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kubesched" \
      org.opencontainers.image.description="A Kubernetes pod scheduler with kube-scheduler's algorithm and live policies" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# The root filesystem is read-only in the Deployment: bytecode was compiled at install time.
# KUBESCHED_REVISION: the image has no git checkout, so `kubesched version` reads the commit from here.
ENV PATH=/opt/kubesched/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    KUBESCHED_REVISION=${REVISION}
# A numeric user, so that the kubelet can check runAsNonRoot without a passwd entry.
USER 65532:65532
EXPOSE 10251
ENTRYPOINT ["kubesched", "run"]
