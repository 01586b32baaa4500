# govern: storage lifecycle governance for ML training artifacts.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY governance ./governance
COPY policies ./policies
RUN pip install ".[postgres]" && useradd --create-home --uid 10001 govern
USER govern
WORKDIR /home/govern
ENTRYPOINT ["govern"]
CMD ["--help"]
