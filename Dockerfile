# trainenv image: built with the same script as the README's commands (scripts/dev.sh), so
# what CI proves about the build holds for the image.
#   docker build -t trainenv:dev .

FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/dev.sh scripts/dev.sh
RUN scripts/dev.sh deps && rm -rf /var/lib/apt/lists/*
COPY . .
RUN BUILD_TYPE=Release CMAKE_ARGS="-DTRAINENV_BUILD_TESTS=OFF" scripts/dev.sh build trainenv \
 && build/trainenv check-policies policies

FROM debian:bookworm-slim
# Only the shared libraries the binary links (ldd build/trainenv).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libssl3 libspdlog1.10 libfmt9 libyaml-0-2 libsimdjson14 libjemalloc2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/trainenv /usr/local/bin/trainenv
COPY --from=build /src/policies /etc/trainenv/policies
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/trainenv"]
# The manifests' Deployment replaces this with its own args (starting with "serve").
CMD ["serve", "--policies=/etc/trainenv/policies", \
     "--tls-cert=/etc/trainenv/tls/tls.crt", "--tls-key=/etc/trainenv/tls/tls.key"]
