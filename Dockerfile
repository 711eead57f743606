# A static autox binary on distroless, running as non-root.
#   docker build -t autox --build-arg VERSION=v0.1.0 .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/autox .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/autox /autox
USER 65532:65532
ENTRYPOINT ["/autox"]
