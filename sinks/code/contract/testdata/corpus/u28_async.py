# Asynchronous code.
import asyncio

import gatehouse


async def main():
    gatehouse.get("erp", "/invoices")


asyncio.run(main())
