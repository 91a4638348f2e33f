# trainenv image: built with the same script as the README's commands (scripts/dev.sh), so
# what CI proves about the build holds for the image. The tag is the manifests' image:
#   buildah bud --isolation chroot --network host -t trainenv:0.1.0 .     (or docker build)
# scripts/image.sh builds it without a Docker engine and checks it as the Deployment runs it;
# docs/deploy.md tells how to push it.

# Both stages start from bookworm-slim: the build stage installs all it needs anyway, and one
# base image is less to fetch (or, without a registry, to make: scripts/image.sh).
FROM debian:bookworm-slim AS build
WORKDIR /src
COPY scripts/dev.sh scripts/dev.sh
# Only what building the binary needs: no test framework, benchmark library or test tools.
RUN scripts/dev.sh deps --build && rm -rf /var/lib/apt/lists/*
COPY . .
RUN BUILD_TYPE=Release CMAKE_ARGS="-DTRAINENV_BUILD_TESTS=OFF" scripts/dev.sh build trainenv \
 && build/trainenv check-policies policies

FROM debian:bookworm-slim
# Only the shared libraries the binary links (ldd build/trainenv). The apt caches are removed
# here rather than left to the base image's apt settings, which another base may not have.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libssl3 libspdlog1.10 libfmt9 libyaml-0-2 libsimdjson14 libjemalloc2 libprometheus-cpp-core1.0 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/cache/apt/*.bin \
      /var/cache/debconf/*-old /var/lib/dpkg/*-old /var/log/apt/* /var/log/dpkg.log
COPY --from=build /src/build/trainenv /usr/local/bin/trainenv
COPY --from=build /src/policies /etc/trainenv/policies
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/trainenv"]
# The manifests' Deployment replaces this with its own args (starting with "serve").
CMD ["serve", "--policies=/etc/trainenv/policies", \
     "--tls-cert=/etc/trainenv/tls/tls.crt", "--tls-key=/etc/trainenv/tls/tls.key"]
