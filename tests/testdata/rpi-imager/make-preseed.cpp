// Writes the rpi-preseed.toml Raspberry Pi Imager puts on the boot
// partition, with Imager's own code: its CustomisationGenerator (and the
// sha256crypt and yescrypt it hashes the password with) from a checkout of
// raspberrypi/rpi-imager, which is not part of this tree. How it was built
// and run: README.md beside it.
//
// make-preseed HOSTNAME USER PASSWORD KEYFILE SSID WIFI-PASSWORD COUNTRY
//              TIMEZONE KEYMAP RELEASE-DATE
// The settings are the ones Imager's wizard stores: the password crypted
// as for an OS released on RELEASE-DATE, the Wi-Fi passphrase as its PSK.
#include <QFile>
#include <QTextStream>
#include <QVariantMap>
#include <cstdio>

#include "customization_generator.h"

using rpi_imager::CustomisationGenerator;

int main(int argc, char **argv)
{
    if (argc != 11) {
        fprintf(stderr, "usage: make-preseed HOSTNAME USER PASSWORD KEYFILE SSID WIFI-PASSWORD "
                        "COUNTRY TIMEZONE KEYMAP RELEASE-DATE\n");
        return 2;
    }
    QFile keys(QString::fromUtf8(argv[4]));
    if (!keys.open(QIODevice::ReadOnly)) {
        fprintf(stderr, "cannot read %s\n", argv[4]);
        return 1;
    }
    const QString ssid = QString::fromUtf8(argv[5]);
    QVariantMap s;
    s["hostname"] = QString::fromUtf8(argv[1]);
    s["sshUserName"] = QString::fromUtf8(argv[2]);
    s["sshUserPassword"] = CustomisationGenerator::cryptPassword(argv[3], QString::fromUtf8(argv[10]));
    s["osReleaseDate"] = QString::fromUtf8(argv[10]);
    s["sshEnabled"] = true;
    s["sshPasswordAuth"] = false;
    s["sshAuthorizedKeys"] = QString::fromUtf8(keys.readAll());
    s["wifiSSID"] = ssid;
    s["wifiPasswordCrypt"] = CustomisationGenerator::pbkdf2(argv[6], ssid.toUtf8());
    s["recommendedWifiCountry"] = QString::fromUtf8(argv[7]);
    s["timezone"] = QString::fromUtf8(argv[8]);
    s["keyboard"] = QString::fromUtf8(argv[9]);
    const QByteArray toml = CustomisationGenerator::generateRpiPreseedToml(s, QString(), false, true, QString());
    fwrite(toml.constData(), 1, toml.size(), stdout);
    return 0;
}
