# Settings in a dataclass.
import gatehouse
from dataclasses import dataclass


@dataclass
class Settings:
    provider: str
    base: str = "/api"


cfg = Settings("erp")
gatehouse.get(cfg.provider, cfg.base + "/health")
