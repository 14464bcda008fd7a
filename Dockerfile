# Build: a static binary, no cgo, reproducible paths.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/switchboard .

# Run: distroless static, non-root, nothing but the binary and CA certificates.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/switchboard /switchboard
USER nonroot:nonroot
ENV HTTP_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/switchboard"]
