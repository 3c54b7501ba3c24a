# syntax=docker/dockerfile:1
# One image for every CommitLayer process: `commitlayer api`, `worker`, `migrate`, ...
# Build stage: a static binary (CGO off; the SQLite driver is pure Go).
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The build ID the image's workers register in their Worker Deployment (docs/operations.md): pass the
# revision or release tag, `--build-arg COMMITLAYER_BUILD_ID=$(git rev-parse HEAD)`; without it the
# binary's VCS stamp is used when .git is in the context, else a digest of the binary.
ARG COMMITLAYER_BUILD_ID=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w -X github.com/commitlayer/commitlayer/worker.buildID=${COMMITLAYER_BUILD_ID}" -o /out/commitlayer ./cmd/commitlayer

# Run stage: small, with CA certificates for TLS to Temporal Cloud or Stripe, busybox wget for the
# health check, and an unprivileged user.
FROM alpine:3.22
RUN apk add --no-cache ca-certificates tzdata \
    && addgroup -S -g 10001 commitlayer \
    && adduser -S -D -H -u 10001 -G commitlayer commitlayer
COPY --from=build /out/commitlayer /usr/local/bin/commitlayer
USER 10001:10001
ENV COMMITLAYER_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/commitlayer"]
CMD ["api"]
