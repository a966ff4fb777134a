# Build stage: compile the single `faultline` binary.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
# SQLX_OFFLINE=true (.cargo/config.toml) makes sqlx's compile-time checks read .sqlx/, not a database.
COPY .cargo ./.cargo
COPY .sqlx ./.sqlx
COPY src ./src
COPY crates ./crates
COPY migrations ./migrations
COPY api ./api
RUN cargo build --release --locked --bin faultline

# Runtime stage: the binary and curl for the health check.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 faultline
COPY --from=build /src/target/release/faultline /usr/local/bin/faultline
USER faultline
ENV FAULTLINE_ADDR=0.0.0.0:8080 FAULTLINE_DATA_DIR=/tmp/faultline
EXPOSE 8080
ENTRYPOINT ["faultline"]
CMD ["serve"]
