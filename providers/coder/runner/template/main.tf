# A Coder template for Paperclip's coder provider: one Docker container per workspace, user coder in
# /home/coder (a volume: kept across stop and start, removed with the workspace), an agent whose
# startup script installs and starts the Paperclip runner app, and that app declared as a path app
# (slug paperclip-runner, owner-only, with a healthcheck), which the provider reaches through Coder's
# app proxy. Copy the runner's files next to this file first (see ../README.md), then:
#
#   coder templates push paperclip -d .
terraform {
  required_providers {
    coder = {
      source  = "coder/coder"
      version = ">= 2.0.0"
    }
    docker = {
      source = "kreuzwerker/docker"
    }
  }
}

variable "docker_socket" {
  default     = ""
  description = "(Optional) Docker socket URI"
  type        = string
}

variable "image" {
  # Anything with bash, node >= 18, tar, base64, coreutils and git, and a user coder (uid 1000) in /home/coder.
  default     = "codercom/enterprise-node:ubuntu"
  description = "The workspace image"
  type        = string
}

variable "runner_port" {
  default     = 4100
  description = "The runner app's port on the workspace's loopback"
  type        = number
}

provider "docker" {
  host = var.docker_socket != "" ? var.docker_socket : null
}

data "coder_provisioner" "me" {}
data "coder_workspace" "me" {}
data "coder_workspace_owner" "me" {}

locals {
  # The runner app's files (dist/runner/*.js of @paperclip-sandbox/plugin-coder), copied into ./paperclip-runner.
  runner_files = fileset("${path.module}/paperclip-runner", "*.js")
  install_runner = join("\n", concat(
    [
      "set -e",
      "dir=\"$HOME/.paperclip-runner\"",
      "mkdir -p \"$dir\"",
      "printf '%s\\n' '{\"type\":\"module\"}' > \"$dir/package.json\"",
    ],
    [for name in local.runner_files : "echo '${filebase64("${path.module}/paperclip-runner/${name}")}' | base64 -d > \"$dir/${name}\""],
    [
      # Keep a runner that already answers on its port (not by its pid file: pids start again with the workspace, the home disk does not).
      "if node -e \"require('net').connect(${var.runner_port},'127.0.0.1').on('connect',()=>process.exit(0)).on('error',()=>process.exit(1))\" 2>/dev/null; then exit 0; fi",
      # Emptied here, not by the background job's redirect: the wait below must not read the last start's line.
      ": >\"$dir/log\"",
      "PAPERCLIP_RUNNER_PORT=${var.runner_port} nohup node \"$dir/paperclip-runner.js\" >>\"$dir/log\" 2>&1 </dev/null &",
      "echo $! > \"$dir/pid\"",
      "i=0; while [ \"$i\" -lt 600 ]; do grep -q listening \"$dir/log\" 2>/dev/null && exit 0; i=$((i + 1)); sleep 0.1; done",
      "echo 'paperclip-runner did not start:' >&2; cat \"$dir/log\" >&2; exit 1",
    ],
  ))
}

resource "coder_agent" "main" {
  arch = data.coder_provisioner.me.arch
  os   = "linux"
  dir  = "/home/coder"
  # Blocking: the agent is ready (and Paperclip hands out the workspace) only once the runner listens.
  startup_script_behavior = "blocking"
  startup_script          = local.install_runner
}

# The runner app: a path app (not a subdomain one), reachable by its owner only.
resource "coder_app" "paperclip_runner" {
  agent_id     = coder_agent.main.id
  slug         = "paperclip-runner"
  display_name = "Paperclip runner"
  url          = "http://localhost:${var.runner_port}"
  subdomain    = false
  share        = "owner"
  hidden       = true

  healthcheck {
    url       = "http://localhost:${var.runner_port}/healthz"
    interval  = 2
    threshold = 10
  }
}

resource "docker_volume" "home_volume" {
  name = "coder-${data.coder_workspace.me.id}-home"
  lifecycle {
    ignore_changes = all
  }
  labels {
    label = "coder.workspace_id"
    value = data.coder_workspace.me.id
  }
}

resource "docker_container" "workspace" {
  count    = data.coder_workspace.me.start_count
  image    = var.image
  name     = "coder-${data.coder_workspace_owner.me.name}-${lower(data.coder_workspace.me.name)}"
  hostname = data.coder_workspace.me.name
  # Use the docker gateway if the access URL is 127.0.0.1
  entrypoint = ["sh", "-c", replace(coder_agent.main.init_script, "/localhost|127\\.0\\.0\\.1/", "host.docker.internal")]
  env        = ["CODER_AGENT_TOKEN=${coder_agent.main.token}"]
  host {
    host = "host.docker.internal"
    ip   = "host-gateway"
  }
  volumes {
    container_path = "/home/coder"
    volume_name    = docker_volume.home_volume.name
    read_only      = false
  }
  labels {
    label = "coder.workspace_id"
    value = data.coder_workspace.me.id
  }
}
