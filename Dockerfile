# One image for the operator, the worker and the job executor (`remedy exec`).
FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
# Dependencies first, so source edits reuse the module layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags="-s -w" -o /remedy ./cmd/remedy

FROM gcr.io/distroless/static:nonroot
COPY --from=build /remedy /remedy
# 65532 is distroless's nonroot; Jobs also pin it (runAsNonRoot needs a numeric user).
USER 65532:65532
ENTRYPOINT ["/remedy"]
