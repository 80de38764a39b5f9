# pgq-exporter: the exporter container.
# Build: docker build -t pgq-exporter .
# Run:   docker run -p 9188:9188 -e DATA_SOURCE_NAME=postgresql://... pgq-exporter
#        (or mount a config at /etc/pgq-exporter/config.yaml; a DSN can come from
#        a mounted secret file through the config's dsn_file key)

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY pgq_exporter ./pgq_exporter
# The project's wheel and the wheels of its dependencies, nothing else.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.12-slim
ARG UID=10001
RUN useradd --system --uid "${UID}" --no-create-home --shell /usr/sbin/nologin pgq
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels /wheels/pgq_exporter-*.whl \
    && rm -rf /wheels
COPY deploy/docker/config.yaml /etc/pgq-exporter/config.yaml
USER 10001
EXPOSE 9188
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD ["pgq-exporter", "healthcheck", "--web.listen-address", "127.0.0.1:9188"]
ENTRYPOINT ["pgq-exporter", "serve"]
CMD ["--config", "/etc/pgq-exporter/config.yaml"]
