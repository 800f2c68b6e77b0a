#!/usr/bin/env python3
"""Drives an emulator's agent console in headless Chromium, as a person at the page would.

Usage: agent_console_browser.py CONSOLE_URL SCREENSHOT_DIR NAME

Waits for the app's message ("hello from the app"), selects its conversation, accepts it where
the vendor offers that, answers it with the keyboard (Enter sends), presses "Drop the
connection", then waits until the page shows the app's reply ("thanks, that helps") and every
agent message read. Checks the page at 1280x800 and at a phone's width (390 px: nothing wider
than the window) and saves a screenshot of each. Prints one line per step and, last,
"RESULT {json}"; exits 1 with the reason when a step fails.

Chromium is Debian's (`chromium`, `chromium-driver`), headless, reaching nothing but loopback.
The whole run has 150 s (the test that starts it, 3 minutes): past that the script is killed.
"""

import json
import os
import signal
import sys

import headless_chromium
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

HELLO = "hello from the app"
ANSWER = "Hi from the browser"
REPLY = "thanks, that helps"


def browser():
    # Nothing but loopback: the page must work offline.
    return headless_chromium.browser(1280, 800, reachable="127.0.0.1")


def step(text):
    print(text, flush=True)


def main():
    url, shots, name = sys.argv[1], sys.argv[2], sys.argv[3]
    signal.alarm(150)
    driver = browser()
    try:
        wait = WebDriverWait(driver, 60, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,))
        driver.get(url)
        wait.until(lambda d: d.find_element(By.ID, "connection").text == "connected")
        step("page connected")

        def select_conversation(d):
            # Found and clicked in one try: a state frame may draw the list anew in between.
            buttons = d.find_elements(By.CSS_SELECTOR, "button.conversation")
            if not buttons:
                return False
            buttons[0].click()
            return True

        def messages():
            # One script call reads the list at once: the page redraws it on every state frame.
            return driver.execute_script(
                "return [...document.querySelectorAll('#messages .message')].map(e => "
                "({text: e.querySelector('.text').textContent, author: e.dataset.author, read: e.dataset.read === 'true'}))"
            )

        def message_texts():
            return [m["text"] for m in messages()]

        wait.until(select_conversation)
        wait.until(lambda d: HELLO in message_texts())
        step("the app's message is on the page")

        accept = driver.find_element(By.ID, "accept")
        if accept.get_attribute("aria-disabled") != "true":
            accept.click()
            wait.until(lambda d: "active" in d.find_element(By.ID, "chat-meta").text)
            step("accepted")
        else:
            step("accept not offered: " + accept.get_attribute("title"))

        box = driver.find_element(By.ID, "text")
        label = driver.find_element(By.CSS_SELECTOR, "label[for=text]").text
        box.send_keys(ANSWER)
        box.send_keys(Keys.ENTER)
        wait.until(lambda d: ANSWER in message_texts())
        step("answered with Enter (the box is labelled %r)" % label)

        before = driver.find_element(By.ID, "result").text
        driver.find_element(By.ID, "disconnect").click()

        def dropped(d):
            # The answer to the press, and the same line newest in the log.
            line = d.find_element(By.ID, "result").text
            newest = d.find_elements(By.CSS_SELECTOR, "#log li")
            return line != before and newest and newest[0].text == line and d.find_element(By.ID, "result").get_attribute("class") == "ok"

        wait.until(dropped)
        step("dropped the connection: " + driver.find_element(By.ID, "result").text)

        def answered(d):
            shown = messages()
            agent = [m for m in shown if m["author"] == "agent"]
            return any(m["text"] == REPLY for m in shown) and agent and all(m["read"] for m in agent)

        try:
            wait.until(answered)
        except TimeoutException:
            raise SystemExit("the app's reply and read marker did not show: " + json.dumps(message_texts()))
        step("the app's reply and its read marker are on the page")

        driver.execute_script("window.scrollTo(0, 0)")
        wide = os.path.join(shots, name + "-1280.png")
        driver.save_screenshot(wide)
        driver.set_window_size(390, 844)
        wait.until(lambda d: d.execute_script("return window.innerWidth") <= 400)
        driver.execute_script("window.scrollTo(0, 0)")
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        narrow = os.path.join(shots, name + "-390.png")
        driver.save_screenshot(narrow)
        unlabelled = driver.execute_script(
            "return [...document.querySelectorAll('input, textarea')].filter(e => !document.querySelector(`label[for=\"${e.id}\"]`)).map(e => e.id)"
        )
        result = {
            "messages": message_texts(),
            "read": True,
            "overflow390": overflow,
            "unlabelled": unlabelled,
            "screenshots": [wide, narrow],
            "log": driver.find_element(By.ID, "log").text.splitlines(),
        }
        print("RESULT " + json.dumps(result), flush=True)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
