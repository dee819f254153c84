// SPDX-License-Identifier: Apache-2.0
// NCCL INFO log parsing. Only substrings NCCL has printed the same way across 2.1x-2.28 are used.
#include "kuberdma/validator/nccl_log.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "kuberdma/base/files.h"

namespace kuberdma::validator {

namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t e = s.find(sep, pos);
    out.push_back(s.substr(pos, e == std::string::npos ? std::string::npos : e - pos));
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  return out;
}

}  // namespace

void NcclLog::AddText(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    Add(text.substr(pos, e == std::string_view::npos ? std::string_view::npos : e - pos));
    if (e == std::string_view::npos) break;
    pos = e + 1;
  }
}

bool NcclLog::AddFile(const std::string& path) {
  size_t skipped = 0;
  auto text = ReadFileHeadTail(path, kMaxLogHeadBytes, kMaxLogTailBytes, &skipped);
  if (!text) return false;
  skipped_bytes_ += skipped;
  AddText(*text);
  return true;
}

void NcclLog::Warn(std::string_view text) {
  if (warnings_.size() < kMaxWarnings) {
    warnings_.emplace_back(text.substr(0, 1024));
  } else {
    ++dropped_warnings_;
  }
}

void NcclLog::Add(std::string_view line) {
  if (line.size() > kMaxLineBytes) line = line.substr(0, kMaxLineBytes);
  if (auto at = line.find("NCCL version "); at != std::string_view::npos && version_.empty()) {
    auto v = line.substr(at + 13);
    version_ = std::string(v.substr(0, v.find_first_of("+ ")));
  }
  if (auto at = line.find("Using network "); at != std::string_view::npos) {
    auto v = line.substr(at + 14);
    network_ = std::string(v.substr(0, v.find_first_of(" \r")));
  }
  // "NET/IB : Using [0]mlx5_0:1/RoCE ..." and "NET/Socket : Using [0]net1:10.1.0.1<0> ..."
  for (std::string_view net : {"IB", "Socket"}) {
    std::string key = "NET/" + std::string(net) + " : Using";
    if (auto at = line.find(key); at != std::string_view::npos)
      UsingLine(net, line.substr(at + key.size()));
  }
  if (auto at = line.find(" via ");
      at != std::string_view::npos && line.find("Channel ") != std::string_view::npos) {
    ChannelLine(line.substr(at + 5));
  }
  if (auto at = line.find("GPU Direct RDMA "); at != std::string_view::npos) {
    GdrLine(line.substr(at + 16));
  }
  if (line.find("NET/IB: ") != std::string_view::npos &&
      line.find(" GID ") != std::string_view::npos) {
    QpLine(line);
  }
  if (auto at = line.find("NCCL WARN"); at != std::string_view::npos) {
    // A log cut right after "NCCL WARN" (the watchdog killed the rank) has no text to keep.
    Warn(line.substr(std::min(line.size(), at + 10)));
  }
}

void NcclLog::UsingLine(std::string_view net, std::string_view rest) {
  if (network_.empty()) network_ = std::string(net);
  devices_.clear();
  // Entries " [i]name:..." up to " ; OOB" (IB) or the end.
  auto oob = rest.find(" ; OOB");
  if (oob != std::string_view::npos) rest = rest.substr(0, oob);
  size_t pos = 0;
  while ((pos = rest.find('[', pos)) != std::string_view::npos) {
    auto close = rest.find(']', pos);
    if (close == std::string_view::npos) break;
    auto end = rest.find(' ', close);
    std::string_view entry = rest.substr(
        close + 1, end == std::string_view::npos ? std::string_view::npos : end - close - 1);
    devices_.emplace_back(entry.substr(0, entry.find(':')));
    pos = close + 1;
  }
}

void NcclLog::ChannelLine(std::string_view via) {
  // "NET/IB/0/GDRDMA", "NET/IB/0(1)/GDRDMA" (PXN), "NET/Socket/1", "P2P/CUMEM/read",
  // "SHM/direct/direct", "NVLS", "CollNet/..."
  std::string v(via.substr(0, via.find_first_of(" \r")));
  auto parts = Split(v, '/');
  if (parts.empty()) return;
  if (parts[0] == "NET" && parts.size() >= 3) {
    transports_.insert("NET/" + parts[1]);
    int idx = std::atoi(parts[2].c_str());
    // "/GDRDMA", and from 2.26 "/GDRDMA(PCI)" for C2C platforms' forced PCIe mapping.
    bool direct = std::any_of(parts.begin() + 3, parts.end(),
                              [](const std::string& p) { return p.rfind("GDRDMA", 0) == 0; });
    if (idx >= 0 && static_cast<size_t>(idx) < devices_.size()) {
      for (const auto& d : Split(devices_[static_cast<size_t>(idx)], '+')) {
        ++channels_[d];
        ++(direct ? gdr_[d].direct_channels : gdr_[d].staged_channels);
      }
    } else {
      Warn("channel via NET device " + parts[2] + " that NCCL did not list");
    }
    return;
  }
  transports_.insert(parts[0]);
}

namespace {

// The number after `key` in `line` ("IbDev 3" -> 3), or -1.
long NumberAfter(std::string_view line, std::string_view key) {
  auto at = line.find(key);
  if (at == std::string_view::npos) return -1;
  std::string rest(line.substr(at + key.size()));
  char* end = nullptr;
  long v = std::strtol(rest.c_str(), &end, 10);
  return end == rest.c_str() ? -1 : v;
}

}  // namespace

void NcclLog::QpLine(std::string_view line) {
  // 2.28: "NCCL Dev 0 IbDev 3 Port 1 ..."; older: "NET/IB: Dev 3 Port 1 ...".
  long dev = NumberAfter(line, " IbDev ");
  if (dev < 0) dev = NumberAfter(line, " Dev ");
  long index = NumberAfter(line, " GID ");
  auto open = line.find('(', line.find(" GID "));
  auto slash = line.find('/', open);
  auto close = line.find(')', slash);
  if (dev < 0 || index < 0 || open == std::string_view::npos || slash == std::string_view::npos ||
      close == std::string_view::npos || static_cast<size_t>(dev) >= devices_.size()) {
    return;
  }
  GidUse g{.index = static_cast<int>(index)};
  g.subnet_prefix =
      std::strtoull(std::string(line.substr(open + 1, slash - open - 1)).c_str(), nullptr, 16);
  g.interface_id =
      std::strtoull(std::string(line.substr(slash + 1, close - slash - 1)).c_str(), nullptr, 16);
  for (const auto& d : Split(devices_[static_cast<size_t>(dev)], '+')) gids_[d] = g;
}

std::vector<std::string> NcclLog::DevicesAt(long idx) const {
  if (idx < 0 || static_cast<size_t>(idx) >= devices_.size()) return {};
  return Split(devices_[static_cast<size_t>(idx)], '+');
}

void NcclLog::GdrLine(std::string_view rest) {
  // Per device (every version): "Enabled for HCA 0 'mlx5_0'" / "Disabled for HCA 3 'mlx5_3'".
  // Per GPU and device: "Disabled for GPU 18000 / HCA 0 (distance 7 > 4)": the device is NCCL's
  // NET index, in decimal up to 2.20 and as a hex topology id from 2.21 (the index in its low 56
  // bits); "Enabled for GPU ... read 0 [mode Default]" needs nothing kept.
  bool enabled = rest.rfind("Enabled ", 0) == 0;
  if (!enabled && rest.rfind("Disabled ", 0) != 0) return;
  auto quote = rest.find(" '");
  if (rest.find(" for HCA ") != std::string_view::npos && quote != std::string_view::npos) {
    auto name = rest.substr(quote + 2);
    name = name.substr(0, name.find('\''));
    for (const auto& d : Split(std::string(name), '+')) gdr_[d].supported = enabled ? 1 : 0;
    return;
  }
  auto hca = rest.find("/ HCA ");
  auto open = rest.find("(distance ");
  if (enabled || hca == std::string_view::npos || open == std::string_view::npos) return;
  std::string id(rest.substr(hca + 6, rest.find(' ', hca + 6) - hca - 6));
  // NCCL 2.18-2.20 print the index in decimal; an unknown version is taken as a recent one.
  bool hex = version_.rfind("2.", 0) != 0 || std::atoi(version_.c_str() + 2) >= 21;
  unsigned long long v = std::strtoull(id.c_str(), nullptr, hex ? 16 : 10) & 0x00ffffffffffffffULL;
  auto close = rest.find(')', open);
  std::string why(rest.substr(open + 1, close == std::string_view::npos ? 64 : close - open - 1));
  for (const auto& d : DevicesAt(static_cast<long>(v))) gdr_[d].too_far = why;
}

std::array<uint8_t, 16> GidUse::Bytes() const {
  std::array<uint8_t, 16> b{};
  for (int i = 0; i < 8; ++i) {
    b[static_cast<size_t>(i)] = static_cast<uint8_t>(subnet_prefix >> (8 * i));
    b[8 + static_cast<size_t>(i)] = static_cast<uint8_t>(interface_id >> (8 * i));
  }
  return b;
}

sysfs::Gid GidUse::AsSysfs() const {
  auto b = Bytes();
  std::string text;
  char group[8];
  for (size_t i = 0; i < b.size(); i += 2) {
    std::snprintf(group, sizeof group, "%s%02x%02x", i == 0 ? "" : ":", b[i], b[i + 1]);
    text += group;
  }
  return {.index = static_cast<uint32_t>(std::max(index, 0)), .gid = text};
}

bool GidUse::IsLinkLocal() const { return AsSysfs().IsLinkLocal(); }
std::string GidUse::Ipv4() const { return AsSysfs().Ipv4(); }
std::string GidUse::Address() const { return AsSysfs().Address(); }

std::set<std::string> NcclLog::devices() const {
  std::set<std::string> out;
  for (const auto& d : devices_) {
    for (const auto& p : Split(d, '+')) out.insert(p);
  }
  return out;
}

std::set<std::string> NcclLog::bypasses() const {
  std::set<std::string> out;
  for (const auto& t : transports_) {
    if (t.rfind("NET/", 0) != 0) out.insert(t);
  }
  return out;
}

}  // namespace kuberdma::validator
