# mockserver on the CPU build of torch. Build: docker build -t mockserver .
# Run:   docker run -p 4010:4010 mockserver
FROM python:3.11-slim
WORKDIR /app
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
# The CPU wheel first, from PyTorch's CPU index, so no CUDA packages are pulled in.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY mockserver ./mockserver
RUN pip install .
EXPOSE 4010
CMD ["mockserver", "serve", "--host", "0.0.0.0", "--port", "4010"]
